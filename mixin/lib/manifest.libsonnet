// Text renderers for the shipped files. Plain jsonnet's std.manifestYamlDoc
// and std.manifestJsonEx sort keys alphabetically, quote every string, print
// 0.1 as 0.10000000000000001 and an empty list over three lines; these print
// what a person would write: keys in a chosen order, plain YAML scalars where
// that is safe, block scalars for multi-line text, short numbers.
//
// jsonnet 0.18 runs much of its std library as jsonnet, character by
// character (std.escapeStringJson takes seconds for one dashboard), while
// std.strReplace, std.substr, std.codepoint and std.stringChars are native:
// the string tests below are built on those.
local contains(s, c) = std.length(std.strReplace(s, c, '')) != std.length(s);

local isLetter(c) = local p = std.codepoint(c); (p >= 65 && p <= 90) || (p >= 97 && p <= 122);
local isDigit(c) = local p = std.codepoint(c); p >= 48 && p <= 57;
local isPlainChar(c) = isLetter(c) || isDigit(c) || std.member(['_', ':', '.', '/', '-'], c);
// Words YAML 1.1 reads as booleans or null when plain.
local reserved = ['true', 'false', 'yes', 'no', 'on', 'off', 'y', 'n', 'null', '~'];

// Control characters other than newline and tab.
local controls = [std.char(i) for i in std.range(0, 8) + std.range(11, 31) + [127]];
// `text` if it holds none of `controls` (quote() leaves them raw): one check
// of the whole document is far cheaper than one per string.
local checked(text) =
  assert !std.foldl(function(bad, c) bad || contains(text, c), controls, false) :
         'a string of the mixin holds a control character other than newline or tab';
  text;

// `s` as a JSON string, which is also a YAML double-quoted scalar.
local quote(s) = '"' + std.foldl(
  function(t, e) std.strReplace(t, e[0], e[1]),
  [['\\', '\\\\'], ['"', '\\"'], ['\n', '\\n'], ['\t', '\\t']],
  s,
) + '"';

// A Prometheus duration such as 30s, 5m or 1h: plain, never a number.
local isDuration(cs) =
  local n = std.length(cs);
  n >= 2 && std.member(['s', 'm', 'h', 'd', 'w', 'y'], cs[n - 1])
  && std.length([c for c in cs[0:n - 1] if !isDigit(c)]) == 0;

// Whether `s` can be written as a plain YAML scalar that reads back as the
// same string: identifiers, metric names, URLs paths, durations.
local isPlain(s) =
  std.length(s) > 0 && !contains(s, ' ') && !contains(s, '"') && !contains(s, '\n')
  && (
    local cs = std.stringChars(s);
    (isLetter(cs[0]) && std.length([c for c in cs if !isPlainChar(c)]) == 0
     && cs[std.length(cs) - 1] != ':' && !std.member(reserved, std.asciiLower(s)))
    || isDuration(cs)
  );

local number(n) =
  if n == std.floor(n) && std.abs(n) < 1e15 then std.toString(n)
  else std.format('%.15g', [n]);

// Fields of `o`: those named in `order` first, in that order, then the rest
// sorted.
local fields(o, order) =
  local present = std.objectFields(o);
  [k for k in order if std.member(present, k)]
  + [k for k in present if !std.member(order, k)];

local yamlKey(k) = if isPlain(k) then k else quote(k);

local yamlInline(v) =
  if v == null then 'null'
  else if std.isBoolean(v) then (if v then 'true' else 'false')
  else if std.isNumber(v) then number(v)
  else if std.isString(v) then (if isPlain(v) then v else quote(v))
  else if std.isObject(v) && std.length(v) == 0 then '{}'
  else if std.isArray(v) && std.length(v) == 0 then '[]'
  else error 'yamlInline: not a scalar';

local isBlock(v) = (std.isObject(v) || std.isArray(v)) && std.length(v) > 0;
local isText(v) = std.isString(v) && contains(v, '\n');

// `head` (`key: ` or `- `), `|` and the text's lines below it, indented by `ind`.
local blockScalar(head, s, ind) =
  local lines = std.split(s, '\n');
  local clip = std.endsWith(s, '\n');
  local body = if clip then lines[0:std.length(lines) - 1] else lines;
  assert !std.endsWith(s, '\n\n') : 'YAML block text ends in a blank line: ' + s;
  assert !std.startsWith(s, ' ') : 'YAML block text starts with a space: ' + s;
  head + (if clip then '|' else '|-') + '\n'
  + std.join('\n', [if l == '' then '' else ind + l for l in body]);

local yamlBlock(v, ind, order) =
  if std.isObject(v) then
    std.join('\n', [
      local x = v[k];
      local head = ind + yamlKey(k) + ':';
      if isBlock(x) then head + '\n' + yamlBlock(x, ind + '  ', order)
      else if isText(x) then blockScalar(head + ' ', x, ind + '  ')
      else head + ' ' + yamlInline(x)
      for k in fields(v, order)
    ])
  else
    std.join('\n', [
      if isBlock(x) then
        // The item as a block one level deeper, its first indent turned into "- ".
        local inner = yamlBlock(x, ind + '  ', order);
        ind + '- ' + std.substr(inner, std.length(ind) + 2, std.length(inner))
      else if isText(x) then blockScalar(ind + '- ', x, ind + '  ')
      else ind + '- ' + yamlInline(x)
      for x in v
    ]);

local json(v, ind, order) =
  local ind2 = ind + '  ';
  if std.isObject(v) then
    if std.length(v) == 0 then '{}'
    else '{\n' + std.join(',\n', [
      ind2 + quote(k) + ': ' + json(v[k], ind2, order)
      for k in fields(v, order)
    ]) + '\n' + ind + '}'
  else if std.isArray(v) then
    if std.length(v) == 0 then '[]'
    else '[\n' + std.join(',\n', [ind2 + json(x, ind2, order) for x in v]) + '\n' + ind + ']'
  else if std.isString(v) then quote(v)
  else if std.isNumber(v) then number(v)
  else if std.isBoolean(v) then (if v then 'true' else 'false')
  else if v == null then 'null'
  else error 'json: cannot render a function';

{
  // A YAML document (a mapping) with `order` naming the keys that come first.
  yaml(v, order=[]):: checked(yamlBlock(v, '', order) + '\n'),
  // Indented JSON with `order` naming the keys that come first.
  json(v, order=[]):: checked(json(v, '', order) + '\n'),
  // `text` as YAML/shell comment lines.
  comment(text):: std.join('', [
    '#' + (if l == '' then '' else ' ' + l) + '\n'
    for l in std.split(std.rstripChars(text, '\n'), '\n')
  ]),
}
