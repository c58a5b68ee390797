# syntax=docker/dockerfile:1
# One image with both binaries: skeletonhunter-exporter (the DaemonSet) and
# skeletonhunter-localizer (the Deployment). See docs/deploy.md.
#
#   docker build -t skeletonhunter:dev .
#
# Without a container engine, scripts/image.sh builds the same image (an OCI
# layout, from Debian packages) with the run-time contract it reads here.
#
# The run-time contract (numeric non-root USER, the exporter's file
# capabilities, ports) is checked against deploy/kubernetes/ and
# docs/operations.md by tests/tests/ops/deploy.rs.

# --- build: Rust, clang for bpf/, libibverbs for the rdma feature ----------
FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      clang llvm libbpf-dev linux-libc-dev libibverbs-dev libnl-3-dev libnl-route-3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p skeletonhunter-exporter -p skeletonhunter-localizer \
 && install -D -m 0755 target/release/skeletonhunter-exporter /out/skeletonhunter-exporter \
 && install -D -m 0755 target/release/skeletonhunter-localizer /out/skeletonhunter-localizer

# --- run: Debian 12 slim (libibverbs and its providers for RDMA probing) ---
FROM debian:12-slim
# libibverbs1 + ibverbs-providers: RDMA probing (it disables itself on hosts
# without an RNIC). libcap2-bin only to set the file capabilities, then removed.
# Set-uid/set-gid bits are stripped: the exporter container runs without
# no_new_privs (see below), so nothing else in the image may gain privileges.
COPY --from=build /out/ /usr/local/bin/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libibverbs1 ibverbs-providers libcap2-bin ca-certificates \
 && setcap cap_net_raw,cap_bpf,cap_perfmon,cap_dac_read_search,cap_sys_admin,cap_sys_ptrace+ep /usr/local/bin/skeletonhunter-exporter \
 && apt-get purge -y libcap2-bin && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* \
 && find / -xdev -perm /6000 -type f -exec chmod a-s {} +
# Non-root, numeric (Kubernetes checks runAsNonRoot against a number).
# 65532 is the "nonroot" user of distroless images.
USER 65532:65532
# metrics (9465/tcp), UDP echo (9466/udp), TCP dial (9467/tcp); localizer 9479/tcp
EXPOSE 9465/tcp 9466/udp 9467/tcp 9479/tcp
# Exec form: no shell is needed at run time.
ENTRYPOINT ["/usr/local/bin/skeletonhunter-exporter"]
