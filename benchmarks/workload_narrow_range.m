function workload_narrow_range(directory, mode)
% WORKLOAD_NARROW_RANGE  The Octave side of benchmarks/workload_narrow_range.py.
%
% The lines of matmul_test.m (github.com/north-numerical-computing/narrow-range-FP-underflow-experiments,
% commit 95b7205cf728f7eca812851f8b9420d49d905b9a, BSD-2-Clause; T. Mary and M. Mikaitis), run with
% CPFloat's MEX on the inputs that the Python port draws from MATLAB's stream (Octave's rand is not
% MATLAB's): the study's first experiment (fp8-e4m3 -> binary16, p = 1), its first 25 sizes,
% subnormals off then on.
%
%   workload_narrow_range(DIR)          reads DIR/inputs.bin and DIR/sizes.txt (written by
%                                       `python benchmarks/workload_narrow_range.py --export-inputs DIR`),
%                                       writes DIR/results.txt (subnormals n err err_nrl, %.17g) and
%                                       DIR/labm.bin (LABM then LABM_nrl per row, column-major doubles)
%                                       and prints its time.
%   workload_narrow_range(DIR, 'time')  the cost of one call: cpfloat and chop on a 10 x 10 array, and
%                                       one step of the study's inner loop (two cpfloat calls).
%
% CPFloat's MEX for Octave (CPFloat at 0ddba87dd19adf5da154e228b68f86e60051f102, the study's; without
% mkoctfile, the headers of Debian's octave-dev unpacked in OCTDEV with `dpkg -x`):
%   gcc -std=gnu99 -O2 -fPIC -shared -I$OCTDEV/usr/include/octave-7.3.0/octave -I../src cpfloat.c \
%       -o cpfloat.mex -L/usr/lib/x86_64-linux-gnu/octave/7.3.0 -loctinterp -loctave -lm
% (in cpfloat/mex; or `mkoctfile --mex cpfloat.c -I../src` where mkoctfile is installed), then
%   octave-cli --eval "addpath('CPFLOAT/mex'); addpath('CHOP'); workload_narrow_range('DIR')"
if nargin < 2
  mode = 'run';
end
if strcmp(mode, 'time')
  time_calls();
  return
end
sizes = load(fullfile(directory, 'sizes.txt'));
inputs = fopen(fullfile(directory, 'inputs.bin'), 'r');
results = fopen(fullfile(directory, 'results.txt'), 'w');
products = fopen(fullfile(directory, 'labm.bin'), 'w');

input_format = 'fp8-e4m3';
accum_format = 'binary16';
p = 1;
options_input.format = input_format;
[~, options] = cpfloat([], options_input);
t    = options.params(1);
emin = options.params(2);
emax = options.params(3);
u = 2^-t;
fmin = 2^emin;
fmax = 2^emax*(2-4*u);
options_accum.format = accum_format;
[~, options] = cpfloat([], options_accum);
T    = options.params(1);
Emax = options.params(3);
U = 2^(-T);
Fmax = 2^Emax*(2-2*U);
m = 10;
q = 10;

started = tic;
for subnormals_on = 0:1
  options_input.subnormal = subnormals_on;
  options_accum.subnormal = subnormals_on;
  for n = sizes
    A = fread(inputs, [m n], 'double');
    B = fread(inputs, [n q], 'double');
    Ctrue = A*B;
    theta = min(fmax, sqrt(Fmax/n));
    L = previous_pow2(theta./max(abs(A),[],2));
    M = previous_pow2(theta./max(abs(B)));
    Linv = 1./L;
    Minv = 1./M;
    [LABM, err] = scaled_product_error(A, B, L, M, Linv, Minv, Ctrue, options_input, options_accum, p, u);
    options_input.explim = 0;
    options_accum.explim = 0;
    [LABM_nrl, err_nrl] = scaled_product_error(A, B, L, M, Linv, Minv, Ctrue, options_input, options_accum, p, u);
    options_input.explim = 1;
    options_accum.explim = 1;
    fprintf(results, '%d %d %.17g %.17g\n', subnormals_on, n, err, err_nrl);
    fwrite(products, LABM, 'double');
    fwrite(products, LABM_nrl, 'double');
  end
end
seconds = toc(started);
fclose(inputs); fclose(results); fclose(products);
calls = 2*sum(2*(2 + 2*sizes));
printf('Octave %s: %.2f s for the slice, %d cpfloat calls: %.2f us per call\n', ...
       OCTAVE_VERSION, seconds, calls, 1e6*seconds/calls);
end

function [LABM, err] = scaled_product_error(A, B, L, M, Linv, Minv, Ctrue, options_input, options_accum, p, u)
% The study's lines run twice per size (with the range limits, then without: _nrl), written once.
temp1 = L.*A;
temp2 = B.*M;
LA{1} = cpfloat(temp1, options_input);
BM{1} = cpfloat(temp2, options_input);
LABM = matmul(LA, BM, options_accum, p, u);
C = Linv.*LABM.*Minv;
err = norm(C-Ctrue,'inf')/norm(A,'inf')/norm(B,'inf');
end

function y = previous_pow2(x)
y = 2.^floor(log2(x));
end

function C = matmul(A, B, options_accum, p, u)
  C = zeros(size(A{1},1), size(B{1},2));
  for j=1:p
      for k=1:p
          if (j+k-2 < p)
              for i=1:size(A{j},2)
                C = cpfloat(C + u^(j+k-2)*cpfloat(A{j}(:,i)*B{k}(i,:),...
                    options_accum), options_accum);
              end
          end
      end
  end
end

function time_calls()
% The minimum over 5 repeats of the mean over 20000 calls.
rand('seed', 1);
X = rand(10, 10) - 0.5;
a = rand(10, 1); b = rand(1, 10);
C = zeros(10, 10);
options_accum = struct('format', 'binary16', 'subnormal', 0, 'explim', 1);
calls = 20000;
best = inf(1, 4);
chop([], struct('format', 'h'));
for repeat = 1:5
  started = tic;
  for i = 1:calls
    Y = cpfloat(X, options_accum);
  end
  best(1) = min(best(1), toc(started)/calls);
  started = tic;
  for i = 1:calls
    C = cpfloat(C + cpfloat(a*b, options_accum), options_accum);
  end
  best(2) = min(best(2), toc(started)/calls);
  started = tic;
  for i = 1:calls/10
    Y = chop(X);
  end
  best(3) = min(best(3), toc(started)/(calls/10));
  started = tic;
  for i = 1:calls/10
    Y = chop(X, struct('format', 'h'));
  end
  best(4) = min(best(4), toc(started)/(calls/10));
end
printf('Octave %s, per call (us): cpfloat 10x10 %.2f | inner-loop step (2 cpfloat) %.2f | chop 10x10 %.2f | chop 10x10 with options %.2f\n', ...
       OCTAVE_VERSION, 1e6*best);
end
