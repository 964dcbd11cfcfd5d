function ok = run_reference(corpus, out)
%RUN_REFERENCE  Rerun chop.m, roundit.m and float_params.m on the reference corpus's inputs.
%   OK = RUN_REFERENCE(CORPUS) runs, for every case of the MAT-file corpus in
%   the folder CORPUS (written by export_corpus.py beside this file, or the
%   original MAT-files), the MATLAB function that produced it on the stored
%   inputs and options, and compares the result with the stored output: equal
%   element by element and of the same class and size, NaN equal to NaN and
%   the sign of zero ignored (MATLAB's isequal).  It prints one line per group
%   and returns true when every case agrees.
%
%   RUN_REFERENCE(CORPUS, OUT) also writes the fresh outputs to the folder OUT
%   in the same layout (each case's inputs with the outputs computed here),
%   for tools/pack_matlab_reference.py to pack.
%
%   chop.m, roundit.m and float_params.m (github.com/higham/chop, commit
%   906c31e) must be on the path.  Under GNU Octave this adds octave/ (a pow2
%   that scales exactly, as MATLAB's does) for every group and octave_stream/
%   (MATLAB's random stream) for the matlab_stream group; see README.md.
%
%   Groups: chop (randfunc replays the stored column STREAM), roundit,
%   float_params, matlab_native (MATLAB's own outputs) and matlab_stream
%   (rng(seed); c = chop(x, options); after = rand(4, 1)).

if nargin < 2, out = ''; end
here = fileparts(mfilename('fullpath'));
for name = {'chop', 'roundit', 'float_params'}
  if exist(name{1}, 'file') ~= 2
    error('run_reference:path', ['%s.m is not on the path: addpath the folder of ' ...
          'github.com/higham/chop (commit 906c31e)'], name{1});
  end
end
octave = exist('OCTAVE_VERSION', 'builtin') ~= 0;
if octave
  shadowing = warning('query', 'Octave:shadowed-function');
  warning('off', 'Octave:shadowed-function');  % pow2, rand, randi and rng below are meant to shadow
  addpath(fullfile(here, 'octave'), '-begin');
end
ids.chop = case_ids(fullfile(corpus, 'manifest.json'));
ids.matlab_stream = case_ids(fullfile(corpus, 'matlab_stream', 'manifest.json'));
ids.roundit = file_ids(fullfile(corpus, 'roundit', '*.mat'));
ids.matlab_native = file_ids(fullfile(corpus, 'matlab_native', '*_rmode_*.mat'));
if ~isempty(out)
  for sub = {'chop', 'roundit', 'matlab_native', fullfile('matlab_stream', 'chop')}
    if ~exist(fullfile(out, sub{1}), 'dir'), mkdir(fullfile(out, sub{1})); end
  end
  for file = {'manifest.json', fullfile('matlab_stream', 'manifest.json'), 'README.md'}
    if exist(fullfile(corpus, file{1}), 'file'), copyfile(fullfile(corpus, file{1}), fullfile(out, file{1})); end
  end
end

ok = true;
ok = report('chop', run_chop(corpus, out, ids.chop)) && ok;
ok = report('roundit', run_roundit(corpus, out, ids.roundit)) && ok;
ok = report('float_params', run_float_params(corpus, out)) && ok;
ok = report('matlab_native', run_native(corpus, out, ids.matlab_native)) && ok;
if octave
  addpath(fullfile(here, 'octave_stream'), '-begin');
end
try
  ok = report('matlab_stream', run_stream(corpus, out, ids.matlab_stream)) && ok;
catch err
  if octave, rmpath(fullfile(here, 'octave_stream')); end
  rethrow(err);
end
if octave
  rmpath(fullfile(here, 'octave_stream'));
  rmpath(fullfile(here, 'octave'));
  warning(shadowing.state, 'Octave:shadowed-function');
end
clear chop
end


function ids = case_ids(manifest)
% The ids of a manifest.json (a list of cases, each with its id).
cases = jsondecode(fileread(manifest));
if iscell(cases)
  ids = cellfun(@(c) c.id, cases, 'UniformOutput', false);
else
  ids = {cases.id};
end
end


function ids = file_ids(pattern)
% The names, without .mat, of the files that match pattern, sorted.
files = dir(pattern);
ids = sort(regexprep({files.name}, '\.mat$', ''));
end


function ok = report(group, failed)
% One line per group: how many cases agree, and the first that do not.
[n, bad] = deal(failed{1}, failed{2});
fprintf('%-14s %4d of %4d cases agree\n', group, n - numel(bad), n);
for i = 1:min(numel(bad), 10)
  fprintf('    differs: %s\n', bad{i});
end
ok = isempty(bad);
end


function same = same_values(a, b)
% MATLAB's isequal with NaN equal to NaN, and the class must match too.
same = strcmp(class(a), class(b)) && isequal(size(a), size(b)) && ...
       all(a(:) == b(:) | (isnan(a(:)) & isnan(b(:))));
end


function same = same_text(a, b)
% Equal messages; '' and a 1-by-0 char (as a MAT-file may give it back) are both no message.
same = (isempty(a) && isempty(b)) || strcmp(a, b);
end


function r = stream_next(n, s)
% randfunc for stochastic rounding: the next n numbers of the stored stream, as
% a column.  stream_next('reset', s) starts over with the column s;
% stream_next('count') returns how many numbers were consumed since.
persistent stream used
if ischar(n)
  if strcmp(n, 'reset'), stream = s; used = 0; end
  r = used;
  return
end
if used + n > numel(stream)
  error('run_reference:stream', 'the stored stream has only %d numbers', numel(stream));
end
r = stream(used + 1:used + n);
r = r(:);
used = used + n;
end


function result = run_chop(corpus, out, ids)
bad = {};
for i = 1:numel(ids)
  id = ids{i};
  S = load(fullfile(corpus, 'chop', [id '.mat']));
  options = struct('format', S.format, 'round', S.round, 'subnormal', S.subnormal, ...
                   'explim', S.explim, 'flip', 0);
  if ~isempty(S.params), options.params = S.params; end
  if S.round == 5 || S.round == 6
    options.randfunc = @(n) stream_next(n);
  end
  stream_next('reset', S.stream);
  clear chop
  c = []; err = ''; ret_params = [];
  try
    [c, opts] = chop(S.x, options);
    ret_params = opts.params;
  catch e
    err = e.message;
  end
  n_consumed = stream_next('count');
  same = same_values(c, S.c) && same_text(err, S.err) && n_consumed == S.n_consumed && ...
         isequal(ret_params, S.ret_params);
  if ~same, bad{end + 1} = id; end %#ok<AGROW>
  if ~isempty(out)
    S.c = c; S.err = err; S.n_consumed = n_consumed; S.ret_params = ret_params;
    save(fullfile(out, 'chop', [id '.mat']), '-struct', 'S', '-v7');
  end
end
result = {numel(ids), bad};
end


function result = run_roundit(corpus, out, ids)
bad = {};
for i = 1:numel(ids)
  id = ids{i};
  S = load(fullfile(corpus, 'roundit', [id '.mat']));
  options = struct('round', S.mode, 'flip', 0);
  if S.mode == 5 || S.mode == 6
    options.randfunc = @(n) stream_next(n);
  end
  stream_next('reset', S.stream);
  y = roundit(S.x, options);
  n_consumed = stream_next('count');
  if ~(same_values(y, S.y) && n_consumed == S.n_consumed), bad{end + 1} = id; end %#ok<AGROW>
  if ~isempty(out)
    S.y = y; S.n_consumed = n_consumed;
    save(fullfile(out, 'roundit', [id '.mat']), '-struct', 'S', '-v7');
  end
end
result = {numel(ids), bad};
end


function result = run_float_params(corpus, out)
S = load(fullfile(corpus, 'float_params.mat'));
names = cellstr(S.names);
bad = {};
vals = zeros(numel(names), 8);
for i = 1:numel(names)
  [u, xmins, xmin, xmax, p, emins, emin, emax] = float_params(names{i});
  vals(i, :) = [u xmins xmin xmax p emins emin emax];
  if ~same_values(vals(i, :), S.vals(i, :)), bad{end + 1} = names{i}; end %#ok<AGROW>
end
if ~isempty(out)
  S.vals = vals;
  save(fullfile(out, 'float_params.mat'), '-struct', 'S', '-v7');
end
result = {numel(names), bad};
end


function result = run_native(corpus, out, ids)
% MATLAB's own outputs (MAT-files made by MATLAB, published with pychop):
% emu_vals = chop(x, options) with the format, round and subnormal of the file's name.
D = load(fullfile(corpus, 'matlab_native', 'verified_data.mat'));
if ~isempty(out)
  save(fullfile(out, 'matlab_native', 'verified_data.mat'), '-struct', 'D', '-v7');
end
bad = {};
for i = 1:numel(ids)
  id = ids{i};
  S = load(fullfile(corpus, 'matlab_native', [id '.mat']));
  % <format>_rmode_<round>_subnormal_<s>: the input is array for s = 0 and 1e-3 * array for s = 1
  parts = strsplit(id, '_');
  subnormal = str2double(parts{5});
  options = struct('format', parts{1}, 'round', str2double(parts{3}), 'subnormal', subnormal);
  scale = 1;
  if subnormal == 1, scale = 1e-3; end
  clear chop
  c = chop(scale * D.array, options);
  if ~same_values(c(:), S.emu_vals(:)), bad{end + 1} = id; end %#ok<AGROW>
  if ~isempty(out)
    S.emu_vals = reshape(c, size(S.emu_vals));
    save(fullfile(out, 'matlab_native', [id '.mat']), '-struct', 'S', '-v7');
  end
end
result = {numel(ids), bad};
end


function result = run_stream(corpus, out, ids)
% MATLAB's own random stream: rng(seed); c = chop(x, options); after = rand(4, 1).
% The generator's state after rng(seed) is compared too: its 624 words, not the
% position in State(625), whose convention differs (the stored files hold 1
% there, octave_stream/rng.m gives 624, mt19937ar's index after seeding).
bad = {};
for i = 1:numel(ids)
  id = ids{i};
  S = load(fullfile(corpus, 'matlab_stream', 'chop', [id '.mat']));
  options = struct('format', S.format, 'round', S.round, 'subnormal', S.subnormal, ...
                   'flip', S.flip, 'p', S.p);
  if ~isempty(S.params), options.params = S.params; end
  clear chop
  rng(S.seed);
  settings = rng;
  state = double(settings.State(:));
  c = chop(S.x, options);
  after = rand(4, 1);
  same = same_values(c, S.c) && same_values(after, S.after) && isequal(state(1:624), S.state(1:624));
  if ~same, bad{end + 1} = id; end %#ok<AGROW>
  if ~isempty(out)
    S.c = c; S.after = after; S.state = state;
    save(fullfile(out, 'matlab_stream', 'chop', [id '.mat']), '-struct', 'S', '-v7');
  end
end
result = {numel(ids), bad};
end
