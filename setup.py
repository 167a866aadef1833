"""The build step of pyproject.toml: libattn through CMake, copied into the
package (attn/libattn.so, beside it libattn-ompwait.so and any engine
plug-ins it finds there), and GPT-2's vocabulary files (attn/gpt2/), so the
installed package needs no `make install`.
The CMake build folder is build/pip (ATTN_CMAKE_BUILD_DIR to change it);
ATTN_CMAKE_ARGS adds options; ATTN_BUILD_JOBS sets the parallel jobs."""
import glob
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def build_library():
    """Configure and build the shared library; returns the files to ship."""
    build = os.environ.get("ATTN_CMAKE_BUILD_DIR") or os.path.join(HERE, "build", "pip")
    args = ["-DCMAKE_BUILD_TYPE=Release", "-DATTN_BUILD_TESTS=OFF",
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"]  # $ORIGIN: finds its neighbours
    args += shlex.split(os.environ.get("ATTN_CMAKE_ARGS", ""))
    subprocess.check_call(["cmake", "-S", HERE, "-B", build, *args])
    jobs = os.environ.get("ATTN_BUILD_JOBS", str(min(os.cpu_count() or 1, 4)))
    subprocess.check_call(["cmake", "--build", build, "--target", "attn_shared", "-j", jobs])
    lib = os.path.realpath(os.path.join(build, "libattn.so"))
    others = [p for p in glob.glob(os.path.join(build, "libattn-*.so")) if os.path.isfile(p)]
    return [(lib, "libattn.so")] + [(p, os.path.basename(p)) for p in others]


VOCAB = ("encoder.json", "vocab.bpe")


def gpt2_vocabulary():
    """GPT-2's vocabulary files, fetched md5-checked into data/gpt2 (as the
    tests fetch them), shipped as attn/gpt2/ where the library looks."""
    subprocess.check_call(["bash", os.path.join(HERE, "scripts", "get-data.sh"), "gpt2"])
    return [(os.path.join(HERE, "data", "gpt2", f), os.path.join("gpt2", f)) for f in VOCAB]


class BuildPyWithLibrary(build_py):
    """build_py, then libattn built and copied into the package."""

    def run(self):
        super().run()
        dests = [os.path.join(self.build_lib, "attn")]
        if self.editable_mode:  # the package stays in python/: the library goes there too
            dests.append(os.path.join(HERE, "python", "attn"))
        files = build_library()
        vocab = gpt2_vocabulary()
        for dest in dests:
            os.makedirs(os.path.join(dest, "gpt2"), exist_ok=True)
            for src, name in files:
                shutil.copyfile(src, os.path.join(dest, name))
                os.chmod(os.path.join(dest, name), 0o755)
            for src, name in vocab:
                shutil.copyfile(src, os.path.join(dest, name))


setup(cmdclass={"build_py": BuildPyWithLibrary})
