#!/usr/bin/env bash
# image.sh: build the repo's Dockerfile into an image with podman, here, where the public
# registries cannot be reached.
#
#   scripts/image.sh build [TAG]   build TAG (default localhost/seckill-proxy:dev); prints TAG
#   scripts/image.sh app-standin   build localhost/seckill-app-standin:busybox, a busybox image
#                                  that stands in for the application beside the sidecar in
#                                  deploy/k8s (sh, nc, wget); prints its name
#   scripts/image.sh env           the environment that podman needs on this machine (eval it)
#
# The Dockerfile is the one a user builds with `docker build .`; only its base images come in
# as build arguments. Unless BUILDER_IMAGE and RUNTIME_IMAGE name images to use, two stand-ins
# are built first from what the machine has:
#   localhost/seckill-go-standin:<go version>  this machine's Go toolchain (GOROOT) with a busybox
#                                              shell, for golang:<version>-bookworm
#   localhost/seckill-static-standin:nonroot   passwd/group with nonroot (65532), CA certificates
#                                              and /tmp, for distroless/static-debian12:nonroot
# The first run installs podman, runc and busybox-static with apt-get. Podman runs with runc
# (crun refuses hybrid cgroups) and with no default ulimits (the default file limit is above
# this machine's hard limit): both through a containers.conf of its own (CONTAINERS_CONF), so
# the system's files are left alone. Exit status 3: podman could not be installed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.stack/image
log() { printf 'image: %s\n' "$*" >&2; }

install() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /bin/busybox ]] || missing+=(busybox-static)
  ((${#missing[@]} == 0)) && return
  log "installing ${missing[*]} with apt-get (first run only)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
    log "could not install ${missing[*]}"
    exit 3
  fi
}

containers_conf() {
  mkdir -p "$STATE"
  cat >"$STATE/containers.conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
  echo "$STATE/containers.conf"
}

# busybox_links DIR APPLET...: /bin/busybox in DIR, with a link for each applet.
busybox_links() {
  local dir=$1
  shift
  cp /bin/busybox "$dir/busybox"
  for applet in "$@"; do ln -s busybox "$dir/$applet"; done
}

# standin_go builds the builder stand-in from this machine's Go and prints its name.
standin_go() {
  local goroot version tag ctx
  goroot=$(go env GOROOT)
  version=$(go env GOVERSION)
  tag=localhost/seckill-go-standin:${version#go}
  if podman image exists "$tag"; then
    echo "$tag"
    return
  fi
  log "building $tag from $goroot and busybox"
  ctx=$(mktemp -d)
  mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/usr/local" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/rootfs/root"
  busybox_links "$ctx/rootfs/bin" sh ls mkdir cat env cp rm mv
  cp -a "$goroot" "$ctx/rootfs/usr/local/go"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
  cat >"$ctx/Containerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/go/bin:/root/go/bin:/bin HOME=/root GOPATH=/root/go
EOF
  podman build --network host -t "$tag" "$ctx" >&2
  rm -rf "$ctx"
  echo "$tag"
}

# standin_static builds the runtime stand-in and prints its name.
standin_static() {
  local tag=localhost/seckill-static-standin:nonroot ctx
  if podman image exists "$tag"; then
    echo "$tag"
    return
  fi
  log "building $tag"
  ctx=$(mktemp -d)
  mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
  chmod 1777 "$ctx/rootfs/tmp"
  printf 'FROM scratch\nCOPY rootfs/ /\n' >"$ctx/Containerfile"
  podman build -t "$tag" "$ctx" >&2
  rm -rf "$ctx"
  echo "$tag"
}

# standin_app builds the application stand-in and prints its name.
standin_app() {
  local tag=localhost/seckill-app-standin:busybox ctx
  if podman image exists "$tag"; then
    echo "$tag"
    return
  fi
  log "building $tag"
  ctx=$(mktemp -d)
  mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/tmp"
  busybox_links "$ctx/rootfs/bin" sh nc wget sleep printf cat echo
  printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["sleep", "3600"]\n' >"$ctx/Containerfile"
  podman build -t "$tag" "$ctx" >&2
  rm -rf "$ctx"
  echo "$tag"
}

case ${1:-} in
env)
  echo "export CONTAINERS_CONF=$(containers_conf)"
  ;;
build)
  tag=${2:-localhost/seckill-proxy:dev}
  install
  CONTAINERS_CONF=$(containers_conf)
  export CONTAINERS_CONF
  builder=${BUILDER_IMAGE:-$(standin_go)}
  runtime=${RUNTIME_IMAGE:-$(standin_static)}
  log "podman build -t $tag (BUILDER_IMAGE=$builder RUNTIME_IMAGE=$runtime)"
  podman build --network host --build-arg "BUILDER_IMAGE=$builder" --build-arg "RUNTIME_IMAGE=$runtime" \
    -t "$tag" "$ROOT" >&2
  # The build stage (about 1 GB) and the image this tag named before would pile up.
  podman image prune -f >/dev/null
  echo "$tag"
  ;;
app-standin)
  install
  CONTAINERS_CONF=$(containers_conf)
  export CONTAINERS_CONF
  standin_app
  ;;
*)
  echo "usage: $0 build [TAG] | app-standin | env" >&2
  exit 2
  ;;
esac
