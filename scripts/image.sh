#!/bin/sh
# Build the SkeletonHunter OCI image without a container engine or a
# registry: a minimal Debian 12 root (mmdebstrap) with libibverbs and what the
# binaries link, the two binaries, the exporter's file capabilities, and the
# run-time contract the Dockerfile states (USER, setcap, EXPOSE, ENTRYPOINT),
# packed as an OCI image layout by umoci. Push it with skopeo
# (docs/deploy.md, "Build and push the image").
#
#   scripts/image.sh [--binaries DIR] [--out DIR] [--tag TAG] [--mirror URL] [--force]
#
#   --binaries DIR  where skeletonhunter-exporter and -localizer are
#                   (default target/release; built with cargo when missing)
#   --out DIR       the OCI layout (default target/oci/skeletonhunter)
#   --tag TAG       the image's tag in the layout (default: the workspace version)
#   --mirror URL    the Debian mirror (default http://deb.debian.org/debian)
#   --force         rebuild even when the inputs are unchanged
#
# Runs as root (mmdebstrap's root mode keeps file ownership; setcap). Debian
# packages: mmdebstrap, umoci, libcap2-bin (setcap), tar; scripts/setup.sh
# installs them. Two layers: the Debian root, kept next to the layout as
# base-<digest>.tar and rebuilt only when this script, the packages or the
# mirror change; and the binaries. The image is rebuilt only when its inputs
# changed (the root, the Dockerfile, the binaries, the tag): their digest is
# kept in <out>.inputs. Its revision and creation labels are those of the
# commit it was first built at. Exit 2 on bad arguments.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$repo/target/release"
out="$repo/target/oci/skeletonhunter"
tag=""
mirror="http://deb.debian.org/debian"
force=0

usage() {
    echo "image.sh: $1" >&2
    echo "usage: scripts/image.sh [--binaries DIR] [--out DIR] [--tag TAG] [--mirror URL] [--force]" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --binaries) [ $# -ge 2 ] || usage "--binaries needs a directory"; bin_dir=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || usage "--out needs a directory"; out=$2; shift 2 ;;
        --tag) [ $# -ge 2 ] || usage "--tag needs a value"; tag=$2; shift 2 ;;
        --mirror) [ $# -ge 2 ] || usage "--mirror needs a URL"; mirror=$2; shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d'; exit 0 ;;
        *) usage "unknown argument: $1" ;;
    esac
done

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
[ -n "$tag" ] || tag=$version
case "$tag" in
    *[!A-Za-z0-9_.-]*|"") usage "--tag $tag: letters, digits, '_', '.' and '-' only" ;;
esac

# The run-time contract, from the Dockerfile (one place states it).
dockerfile="$repo/Dockerfile"
user=$(sed -n 's/^USER \([0-9][0-9]*:[0-9][0-9]*\)$/\1/p' "$dockerfile" | tail -n 1)
caps=$(sed -n 's/.*setcap \([a-z_,]*+ep\) .*/\1/p' "$dockerfile" | tail -n 1)
ports=$(sed -n 's/^EXPOSE //p' "$dockerfile" | tail -n 1)
entrypoint=$(sed -n 's/^ENTRYPOINT \["\([^"]*\)"\]$/\1/p' "$dockerfile" | tail -n 1)
[ -n "$user" ] && [ -n "$caps" ] && [ -n "$ports" ] && [ -n "$entrypoint" ] ||
    { echo "image.sh: $dockerfile: no numeric USER, setcap ...+ep, EXPOSE or exec-form ENTRYPOINT" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ]; then
    echo "image.sh: run as root (mmdebstrap keeps ownership and file capabilities only as root)" >&2
    exit 1
fi
for tool in mmdebstrap umoci setcap sha256sum; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "image.sh: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done

exporter="$bin_dir/skeletonhunter-exporter"
localizer="$bin_dir/skeletonhunter-localizer"
if [ ! -x "$exporter" ] || [ ! -x "$localizer" ]; then
    if [ "$bin_dir" != "$repo/target/release" ]; then
        echo "image.sh: $bin_dir has no skeletonhunter-exporter and skeletonhunter-localizer" >&2
        exit 2
    fi
    (cd "$repo" && cargo build --release --locked -p skeletonhunter-exporter -p skeletonhunter-localizer)
fi

# Run-time packages: libibverbs and its providers (RDMA probing), CA
# certificates (TLS to Prometheus/Alertmanager); the binaries' other libraries
# (libc, libgcc, libnl) come with them or with the essential set.
packages="libibverbs1,ibverbs-providers,ca-certificates"

# Two layers: the Debian root, cached by what decides it (this script, the
# packages, the mirror), and the binaries. A new build of the binaries
# reuses the root; unchanged inputs reuse the whole image.
base_digest=$( { sha256sum "$0" | cut -d' ' -f1; echo "$mirror $packages"; } | sha256sum | cut -c1-16)
base="$(dirname "$out")/base-$base_digest.tar"
inputs=$( {
    echo "$base_digest $tag"
    sha256sum "$dockerfile" "$exporter" "$localizer" | cut -d' ' -f1
} | sha256sum | cut -d' ' -f1)
stamp="$out.inputs"
if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ] && [ -f "$out/index.json" ]; then
    echo "image.sh: $out:$tag is up to date (inputs $inputs)"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$(dirname "$out")"
epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)

# The root: the essential set plus the packages above, without docs, man
# pages, locales or apt's lists; every set-uid/set-gid bit removed (the
# exporter runs without no_new_privs, so nothing else in the image may gain
# privileges).
if [ "$force" -eq 1 ] || [ ! -f "$base" ]; then
    rm -f "$(dirname "$out")"/base-*.tar
    SOURCE_DATE_EPOCH=$epoch mmdebstrap --variant=essential --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='find "$1" -xdev -perm /6000 -type f -exec chmod a-s {} +' \
        --customize-hook='rm -rf "$1/var/lib/apt/lists"/* "$1/var/cache/apt"/* "$1/var/log"/*' \
        bookworm "$work/base.tar" "$mirror"
    mv "$work/base.tar" "$base"
fi

# The binaries, root-owned, the exporter with its file capabilities (the
# security.capability xattr, kept in the layer's tar).
mkdir -p "$work/bin/usr/local/bin"
install -m 0755 "$exporter" "$localizer" "$work/bin/usr/local/bin/"
setcap "$caps" "$work/bin/usr/local/bin/skeletonhunter-exporter"
chmod 0755 "$work/bin/usr" "$work/bin/usr/local" "$work/bin/usr/local/bin"
tar --xattrs --xattrs-include=security.capability --numeric-owner --owner=0 --group=0 \
    --mtime="@$epoch" --sort=name -C "$work/bin" -cf "$work/bin.tar" ./usr

revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
rm -rf "$out" "$stamp"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci raw add-layer --image "$out:$tag" "$base"
umoci raw add-layer --image "$out:$tag" "$work/bin.tar"
set -- --image "$out:$tag" --config.user="$user" --config.entrypoint="$entrypoint" \
    --config.workingdir=/ --config.env=PATH=/usr/local/bin:/usr/bin:/bin \
    --created="$created" --author="SkeletonHunter" \
    --config.label=org.opencontainers.image.title=skeletonhunter \
    --config.label="org.opencontainers.image.description=SkeletonHunter exporter (entry point) and localizer" \
    --config.label="org.opencontainers.image.version=$version" \
    --config.label="org.opencontainers.image.revision=$revision" \
    --config.label="org.opencontainers.image.created=$created" \
    --config.label=org.opencontainers.image.source=https://github.com/skeletonhunter/skeletonhunter \
    --config.label=org.opencontainers.image.licenses=Apache-2.0 \
    --config.label=org.opencontainers.image.base.name=debian:bookworm
for p in $ports; do
    set -- "$@" --config.exposedports="$p"
done
umoci config "$@"
umoci gc --layout "$out"
echo "$inputs" >"$stamp"
echo "image.sh: wrote $out:$tag (push: skopeo copy oci:$out:$tag docker://REGISTRY/skeletonhunter:$tag)"
