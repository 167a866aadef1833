#!/usr/bin/python3
"""The book's gpt_train.py (chapter 5), run unchanged for timing: its main()
with GPT_CONFIG_124M and OTHER_SETTINGS as its __main__ block writes them,
num_epochs overridden, on torch.set_num_threads(THREADS). tiktoken is
scripts/book_ch05/tiktoken_shim.py (npm's tiktoken through Node.js) and
matplotlib a stub, as for scripts/gen_book_ch05_fixtures.py.
  bench/book_ch05_torch.py BOOK_DIR NODE_MODULES DATA EPOCHS THREADS
Prints the book's lines, then 'wall_s=...'."""
import os, shutil, sys, tempfile, time, types

book_dir, node_modules, data, epochs, threads = sys.argv[1:6]
here = os.path.dirname(os.path.abspath(__file__))
os.environ["NODE_PATH"] = os.path.abspath(node_modules)
sys.path.insert(0, os.path.join(here, "..", "scripts", "book_ch05"))
sys.path.insert(0, os.path.join(here, "..", "scripts"))
import tiktoken_shim
sys.modules["tiktoken"] = tiktoken_shim
mpl = types.ModuleType("matplotlib")
mpl.pyplot = types.ModuleType("matplotlib.pyplot")
sys.modules["matplotlib"] = mpl
sys.modules["matplotlib.pyplot"] = mpl.pyplot
sys.path.insert(0, os.path.abspath(book_dir))
import torch
torch.set_num_threads(int(threads))
import gpt_train
from gen_book_ch05_fixtures import main_block_dicts
cfg, settings = main_block_dicts(open(os.path.join(book_dir, "gpt_train.py"), encoding="utf-8").read())
settings["num_epochs"] = int(epochs)
work = tempfile.mkdtemp()
shutil.copy(data, os.path.join(work, "the-verdict.txt"))
os.chdir(work)
t0 = time.perf_counter()
gpt_train.main(cfg, settings)
print(f"wall_s={time.perf_counter() - t0:.2f}")
shutil.rmtree(work)
