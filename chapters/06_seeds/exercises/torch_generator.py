"""PyTorch's CPU generator and the draws chapters 06 and 07 make from it, in plain Python, for the
graders: they compute the right draws themselves instead of trusting the program under test.

torch.manual_seed(s) seeds a Mersenne Twister (mt19937) with the low 32 bits of s, by the
reference init_genrand; Python's `random` is the same MT19937 but seeds it another way
(init_by_array), so the state is set here by hand and Python's generator then gives torch's 32-bit
draws (getrandbits(32) is one genrand_int32). The draws follow torch 1.13's CPU kernels, as
common/src/data/seed.cpp and sampler.cpp describe them (and chapter 06's and 07's parity tests check
against PyTorch itself): randint takes `low + draw % range`, randperm swaps slot i with one of the
n - i entries left, multinomial with replacement inverts the cumulative weights with a uniform
double made of 53 bits of a 64-bit draw.
"""
import bisect
import random

MASK32 = 0xFFFFFFFF


class TorchGenerator:
    def __init__(self, seed):
        state = [seed & MASK32]
        for i in range(1, 624):
            state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + i) & MASK32)
        self._mt = random.Random()
        self._mt.setstate((3, tuple(state) + (624,), None))

    def random(self):
        return self._mt.getrandbits(32)

    def random64(self):
        high = self.random()
        return (high << 32) | self.random()


def randint(low, high, n, generator):
    """torch.randint(low, high, (n,), generator=g) for ranges below 2^32."""
    return [low + generator.random() % (high - low) for _ in range(n)]


def randperm(n, generator):
    perm = list(range(n))
    for i in range(n - 1):
        z = generator.random() % (n - i)
        perm[i], perm[i + z] = perm[i + z], perm[i]
    return perm


def multinomial_with_replacement(weights, n, generator):
    total = sum(weights)
    cumulative, running = [], 0.0
    for w in weights:
        running += w
        cumulative.append(running)
    cumulative = [c / total for c in cumulative]
    cumulative[-1] = 1.0
    draws = []
    for _ in range(n):
        u = (generator.random64() & ((1 << 53) - 1)) * 2.0 ** -53
        draws.append(bisect.bisect_left(cumulative, u))
    return draws
