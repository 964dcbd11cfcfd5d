function w = mt_words(n)
%MT_WORDS  The next N 32-bit outputs (genrand_int32) of rng.m's Mersenne Twister, as doubles.
global RUN_REFERENCE_MT
if isempty(RUN_REFERENCE_MT), rng(0); end
mt = RUN_REFERENCE_MT.mt;
mti = RUN_REFERENCE_MT.mti;
w = zeros(n, 1);
filled = 0;
while filled < n
  if mti >= 624
    mt = twist(mt);
    mti = 0;
  end
  take = min(n - filled, 624 - mti);
  w(filled + 1:filled + take) = mt(mti + 1:mti + take);
  filled = filled + take;
  mti = mti + take;
end
RUN_REFERENCE_MT.mt = mt;
RUN_REFERENCE_MT.mti = mti;
% tempering
w = bitxor(w, bitshift(w, -11));
w = bitxor(w, bitand(bitshift(w, 7), 2636928640));    % 0x9d2c5680
w = bitxor(w, bitand(bitshift(w, 15), 4022730752));   % 0xefc60000
w = bitxor(w, bitshift(w, -18));
end


function mt = twist(mt)
% mt19937ar's next 624 words (genrand_int32's block), in the reference order.
upper = 2147483648;   % 0x80000000
lower = 2147483647;   % 0x7fffffff
matrix_a = 2567483615;  % 0x9908b0df
for kk = 1:624
  next = mod(kk, 624) + 1;
  y = bitor(bitand(mt(kk), upper), bitand(mt(next), lower));
  v = bitxor(mt(mod(kk + 396, 624) + 1), floor(y / 2));
  if mod(y, 2) == 1
    v = bitxor(v, matrix_a);
  end
  mt(kk) = v;
end
end
