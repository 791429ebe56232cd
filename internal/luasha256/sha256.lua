-- SHA-256 (FIPS 180-4) in Lua 5.1 for Redis scripts: Redis 7.0's Lua has
-- SHA-1 (redis.sha1hex) but no SHA-256. It has the bit library, whose
-- operations take and return 32-bit words as signed numbers; every sum
-- below goes back to a word through bit.tobit, exactly (a Lua number holds
-- 53 bits, and no sum here reaches 2^36).
--
-- sha256hex(msg) is the SHA-256 of the string msg, as 64 lowercase hex
-- digits.
--
-- sha256resume(state, n, msg) is the SHA-256 of p..msg for a prefix p of
-- n bytes (a multiple of 64) that the caller hashed itself: state is the
-- hash's chaining value after p (h0..h7, as 64 hex digits). Go's
-- crypto/sha256 gives it (see package luasha256), so that a script hashes
-- only the bytes it decides.
local sha256hex, sha256resume
do
  local band, bor, bxor, rshift, ror, tobit, tohex =
    bit.band, bit.bor, bit.bxor, bit.rshift, bit.ror, bit.tobit, bit.tohex
  local byte, char, rep, sub, floor = string.byte, string.char, string.rep, string.sub, math.floor
  local K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  }
  -- be32 is the 4 bytes of the word x (0 <= x < 2^32), big-endian.
  local function be32(x)
    return char(floor(x / 16777216) % 256, floor(x / 65536) % 256, floor(x / 256) % 256, x % 256)
  end
  -- finish hashes msg, the last bytes of a message whose first n bytes
  -- left the chaining value h0..h7, and returns the digest in hex.
  local function finish(msg, n, h0, h1, h2, h3, h4, h5, h6, h7)
    -- Padding: 0x80, zeros to 56 mod 64, the length in bits (64 bits).
    local len = #msg
    local bits = (n + len) * 8
    msg = msg .. '\128' .. rep('\0', (55 - len) % 64) .. be32(floor(bits / 4294967296)) .. be32(bits % 4294967296)
    local w = {}
    for i = 1, #msg, 64 do
      for j = 1, 16 do
        local a, b, c, d = byte(msg, i + 4 * j - 4, i + 4 * j - 1)
        w[j] = a * 16777216 + b * 65536 + c * 256 + d
      end
      for j = 17, 64 do
        local x, y = w[j - 15], w[j - 2]
        w[j] = tobit(w[j - 16] + bxor(ror(x, 7), ror(x, 18), rshift(x, 3)) + w[j - 7]
          + bxor(ror(y, 17), ror(y, 19), rshift(y, 10)))
      end
      local a, b, c, d, e, f, g, h = h0, h1, h2, h3, h4, h5, h6, h7
      for j = 1, 64 do
        local t1 = h + bxor(ror(e, 6), ror(e, 11), ror(e, 25)) + bxor(g, band(e, bxor(f, g))) + K[j] + w[j]
        local t2 = bxor(ror(a, 2), ror(a, 13), ror(a, 22)) + bor(band(a, b), band(c, bor(a, b)))
        h, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
      end
      h0, h1, h2, h3 = tobit(h0 + a), tobit(h1 + b), tobit(h2 + c), tobit(h3 + d)
      h4, h5, h6, h7 = tobit(h4 + e), tobit(h5 + f), tobit(h6 + g), tobit(h7 + h)
    end
    return tohex(h0) .. tohex(h1) .. tohex(h2) .. tohex(h3) .. tohex(h4) .. tohex(h5) .. tohex(h6) .. tohex(h7)
  end
  sha256hex = function(msg)
    return finish(msg, 0, 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
  end
  sha256resume = function(state, n, msg)
    if #state ~= 64 or string.find(state, '[^0-9a-f]') then error('sha256resume: state is not 64 hex digits') end
    local h = {}
    for i = 1, 8 do h[i] = tonumber(sub(state, 8 * i - 7, 8 * i), 16) end
    n = tonumber(n)
    if not n or n < 0 or n % 64 ~= 0 then error('sha256resume: prefix length is not a multiple of 64') end
    return finish(msg, n, h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8])
  end
end
