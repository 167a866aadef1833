# Sourced by run_pytest.sh, notebook.sh and readme_examples.sh: the environment in which Python
# loads this build's library. `pyenv SRC LIBATTN` exports PYTHONPATH and
# ATTN_LIBRARY and sets PY, the command that runs /usr/bin/python3 with it: a
# sanitized build's library needs the sanitizer runtimes loaded first (only
# in Python's processes, not in the programs the tests start; Python's own
# allocations are not checked for leaks).
pyenv() {
  export PYTHONPATH="$1/python" ATTN_LIBRARY="$2" PYTHONDONTWRITEBYTECODE=1
  PY=(/usr/bin/python3)
  # (grep reads all of nm's output: no SIGPIPE for callers under pipefail)
  if nm -D "$2" 2> /dev/null | grep ' U __asan_init' > /dev/null; then
    PY=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
      "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" /usr/bin/python3)
  fi
}
