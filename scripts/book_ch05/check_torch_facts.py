#!/usr/bin/python3
"""Check the PyTorch 1.13 facts that tests/fixtures/book_ch05/README.md states.

Run with Debian's /usr/bin/python3 (python3-torch 1.13) from a folder that is not inside
torch's package (e.g. the repo root): `/usr/bin/python3 scripts/book_ch05/check_torch_facts.py`.
Prints one line per fact and exits non-zero if one fails. Uses numpy's legacy
RandomState(seed) only for its raw MT19937 32-bit words (the same init_genrand seeding as
torch's CPU generator).
"""
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

failed = []


def check(name, ok):
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failed.append(name)


def mt_words(seed):
    return np.random.RandomState(seed & 0xFFFFFFFF)._bit_generator


# 1. torch.empty((), dtype=torch.int64).random_() = ((w0 << 32) | w1) mod 2^63.
ok = True
for seed in (123, 7, 2**32 + 5):
    torch.manual_seed(seed)
    got = [torch.empty((), dtype=torch.int64).random_().item() for _ in range(3)]
    bg = mt_words(seed)
    want = []
    for _ in range(3):
        w0, w1 = (int(x) for x in bg.random_raw(2))
        want.append(((w0 << 32) | w1) % 2**63)
    ok &= got == want
check("int64 random_() takes two 32-bit words, high word first, mod 2^63", ok)


# 2. torch.randperm(n, generator=g) on CPU: r = 0..n-1; for i in 0..n-2:
#    z = word % (n - i); swap(r[i], r[i + z]); g seeded with the low 32 bits of its seed.
def randperm_ref(n, seed):
    bg = mt_words(seed)
    r = list(range(n))
    for i in range(n - 1):
        z = int(bg.random_raw()) % (n - i)
        r[i], r[i + z] = r[i + z], r[i]
    return r


ok = True
for seed in (3624216819017203053, 5278339153051796802, 1, 2**40 + 17):
    for n in (1, 2, 18, 100, 1000):
        g = torch.Generator()
        g.manual_seed(seed)
        ok &= torch.randperm(n, generator=g).tolist() == randperm_ref(n, seed)
check("randperm(n) = forward Fisher-Yates, word % (n-i), seed's low 32 bits", ok)


# 3. DataLoader draws: each iter() draws the base seed (one int64) from the global generator,
#    shuffle or not; a RandomSampler draws one more int64 at the first next().
class DS(Dataset):
    def __len__(self):
        return 18

    def __getitem__(self, i):
        return torch.tensor([i])


def words_used(fn):
    """How many 32-bit words fn takes from the global generator (even counts only)."""
    torch.manual_seed(99)
    fn()
    state = torch.get_rng_state()
    for k in range(0, 21, 2):
        torch.manual_seed(99)
        for _ in range(k // 2):
            torch.empty((), dtype=torch.int64).random_()
        if torch.equal(torch.get_rng_state(), state):
            return k
    return None


check("constructing a shuffling DataLoader draws nothing",
      words_used(lambda: DataLoader(DS(), batch_size=2, shuffle=True, drop_last=True)) == 0)
train = DataLoader(DS(), batch_size=2, shuffle=True, drop_last=True)
val = DataLoader(DS(), batch_size=2, shuffle=False, drop_last=False)
check("iter(train loader) alone: 2 words (base seed)", words_used(lambda: iter(train)) == 2)
check("iter(train loader) + first next(): 4 words (base seed, sampler seed)",
      words_used(lambda: next(iter(train))) == 4)
check("a full pass over the train loader: 4 words", words_used(lambda: list(train)) == 4)
check("iter(val loader) + a full pass (SequentialSampler): 2 words (base seed only)",
      words_used(lambda: list(val)) == 2)


def order_check():
    torch.manual_seed(5)
    state = torch.get_rng_state()
    batches = [b.flatten().tolist() for b in train]
    g = torch.Generator()
    g.set_state(state)
    torch.empty((), dtype=torch.int64).random_(generator=g)        # base seed
    seed = torch.empty((), dtype=torch.int64).random_(generator=g).item()
    return [i for b in batches for i in b] == randperm_ref(18, seed)


check("train batches follow randperm(n) seeded with the second int64 after iter()", order_check())



# 4. Dropout in training mode (Debian's non-MKL build) takes two words per element, also for
#    tensors as large as the book's attention weights (2 x 12 x 256 x 256).
def dropout_words():
    n = 2 * 12 * 256 * 256
    torch.manual_seed(3)
    torch.nn.Dropout(0.1).train()(torch.ones(2, 12, 256, 256))
    a = torch.get_rng_state()
    torch.manual_seed(3)
    torch.empty(n, dtype=torch.int64).random_()  # 2 words each
    return torch.equal(a, torch.get_rng_state())


check("nn.Dropout(0.1) on 1,572,864 elements takes 2 words per element", dropout_words())


# 5. Eval mode and argmax generation draw nothing.
def eval_dropout():
    torch.nn.Dropout(0.1).eval()(torch.ones(1000))


check("nn.Dropout in eval mode draws nothing", words_used(eval_dropout) == 0)

sys.exit(1 if failed else 0)
