// Every shipped file of the mixin, by path from the repository root: with
// the default _config, or merged with `config` (a jsonnet object, e.g.
// `{nativeHistograms: true}`). Render with mixin/render.sh
// (`jsonnet -S -m <root>`).
function(config={}) (import 'lib/files.libsonnet')((import 'mixin.libsonnet') + { _config+:: config })
