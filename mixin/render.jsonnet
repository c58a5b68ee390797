// Every shipped file of the mixin with its default _config, by path from the
// repository root. Render with mixin/render.sh (`jsonnet -S -m <root>`).
(import 'lib/files.libsonnet')(import 'mixin.libsonnet')
