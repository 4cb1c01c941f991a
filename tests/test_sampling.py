"""Named-stream truncated-normal sampling (mascot.kernels.sampling) against numpy and scipy references."""

import jax
import numpy as np
import pytest
from scipy import stats

from mascot.kernels.sampling import truncated_normal_from_words, truncated_normal_streams
from mascot.seeds import float_key, stream_words


def _numpy_words(seed, key, n64):
    return np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)).random_raw(n64)


def test_stream_words_are_the_documented_pcg64_streams_and_extend_as_prefixes():
    keys = [(0,), (5,), (0x5830, 16, 6, float_key(0.5), float_key(0.15))]
    w32 = stream_words(123, keys, 7, bits=32)
    w64 = stream_words(123, keys, 3, bits=64)
    for i, k in enumerate(keys):
        assert np.array_equal(w64[i], _numpy_words(123, k, 3))
        assert np.array_equal(w32[i], _numpy_words(123, k, 4).view(np.uint32)[:7])
    # a longer draw extends a shorter one; the threaded path (large draws) equals the serial one
    big = stream_words(123, keys, 70_000, bits=32)
    assert np.array_equal(big[:, :7], w32)
    assert np.array_equal(big[1], stream_words(123, [(5,)], 70_000, bits=32)[0])
    assert len({w.tobytes() for w in w32}) == 3  # distinct keys, distinct streams
    assert stream_words(123, [7], 4).tolist() == stream_words(123, [(7,)], 4).tolist()


def test_float64_draws_are_the_exact_inverse_cdf_of_53_bit_uniforms():
    words = stream_words(9, [(1,)], 5000, bits=64)[0]
    lo, hi = -0.5 / 0.2, 0.5 / 0.2
    with jax.enable_x64(True):
        z = np.asarray(truncated_normal_from_words(words, lo, hi, "float64"))
    u = (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
    ref = stats.truncnorm.ppf(u, lo, hi)
    np.testing.assert_allclose(z, ref, rtol=0, atol=1e-12)


def test_float32_draws_match_the_inverse_cdf_of_23_bit_uniforms():
    words = stream_words(9, [(2,)], 5000, bits=32)[0]
    lo, hi = -1.0, 3.0
    z = np.asarray(truncated_normal_from_words(words, lo, hi, "float32"))
    assert z.dtype == np.float32
    u = (words >> np.uint32(9)).astype(np.float64) * 2.0**-23
    np.testing.assert_allclose(z, stats.truncnorm.ppf(u, lo, hi), rtol=0, atol=2e-5)
    assert z.min() >= lo and z.max() <= hi


@pytest.mark.parametrize("mean,spread,dtype", [(0.5, 0.15, "float32"), (0.1, 1.0, "float32"), (0.7, 0.3, "float64")])
def test_beliefs_follow_the_truncated_normal_on_0_1(mean, spread, dtype):
    with jax.enable_x64(dtype == "float64"):
        x = np.asarray(truncated_normal_streams(4, [(0,), (1,)], (20_000, 5), mean, spread, dtype=dtype))
        second = np.asarray(truncated_normal_streams(4, [(1,)], (20_000, 5), mean, spread, dtype=dtype))
    assert x.shape == (40_000, 5) and x.dtype == np.dtype(dtype)
    assert x.min() >= 0.0 and x.max() <= 1.0
    ref = stats.truncnorm(-mean / spread, (1 - mean) / spread, loc=mean, scale=spread)
    # 2e5 draws from fixed streams: a correct sampler passes with p ~ U(0, 1); a wrong law fails at p ~ 0
    assert stats.kstest(x.ravel().astype(np.float64), ref.cdf).pvalue > 1e-3
    assert np.array_equal(second, x[20_000:])  # block i is stream i's own draw, whatever it is batched with


def test_bad_sampler_inputs_raise():
    w = stream_words(1, [(0,)], 8)
    with pytest.raises(ValueError, match="need lo < hi"):
        truncated_normal_from_words(w, 1.0, 1.0)
    with pytest.raises(ValueError, match="uint64"):
        with jax.enable_x64(True):
            truncated_normal_from_words(w, -1.0, 1.0, "float64")
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="jax_enable_x64"):
            truncated_normal_from_words(stream_words(1, [(0,)], 8, bits=64), -1.0, 1.0, "float64")
    with pytest.raises(ValueError, match="dtype"):
        truncated_normal_from_words(w, -1.0, 1.0, "float16")
    with pytest.raises(ValueError, match="spread"):
        truncated_normal_streams(1, [(0,)], (4,), 0.5, 0.0)
    with pytest.raises(ValueError, match="mean"):
        truncated_normal_streams(1, [(0,)], (4,), 1.5, 0.1)
    with pytest.raises(ValueError, match=">= 0"):
        stream_words(1, [(-1,)], 4)
    with pytest.raises(ValueError, match="bits"):
        stream_words(1, [(0,)], 4, bits=16)
