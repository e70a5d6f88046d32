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
# The first run installs podman, runc, catatonit and busybox-static with apt-get. Podman runs with runc
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
  # podman kube play builds its pods' pause image around catatonit, only a Recommends of podman.
  command -v catatonit >/dev/null || [[ -x /usr/libexec/podman/catatonit ]] || missing+=(catatonit)
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

# scratch_image TAG FILL EXTRA: unless TAG exists, builds it FROM scratch with the rootfs that
# the function FILL makes in the folder it is given, and the Containerfile lines EXTRA; prints
# TAG.
scratch_image() {
  local tag=$1 fill=$2 extra=$3 ctx
  if podman image exists "$tag"; then
    echo "$tag"
    return
  fi
  log "building $tag"
  ctx=$(mktemp -d)
  mkdir -p "$ctx/rootfs/tmp"
  chmod 1777 "$ctx/rootfs/tmp"
  "$fill" "$ctx/rootfs"
  printf 'FROM scratch\nCOPY rootfs/ /\n%s\n' "$extra" >"$ctx/Containerfile"
  podman build --network host -t "$tag" "$ctx" >&2
  rm -rf "$ctx"
  echo "$tag"
}

# The builder stand-in: this machine's Go toolchain (GOROOT) and a busybox shell.
fill_go() {
  mkdir -p "$1/bin" "$1/usr/local" "$1/etc/ssl/certs" "$1/root"
  busybox_links "$1/bin" sh ls mkdir cat env cp rm mv
  cp -a "$(go env GOROOT)" "$1/usr/local/go"
  cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
}
standin_go() {
  local version
  version=$(go env GOVERSION)
  scratch_image "localhost/seckill-go-standin:${version#go}" fill_go "ENV PATH=/usr/local/go/bin:/root/go/bin:/bin HOME=/root GOPATH=/root/go"
}

# The runtime stand-in: the nonroot user and group (65532) and the CA certificates.
fill_static() {
  mkdir -p "$1/etc/ssl/certs"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
}
standin_static() { scratch_image localhost/seckill-static-standin:nonroot fill_static ""; }

# The application stand-in: busybox's sh, nc and wget.
fill_app() {
  mkdir -p "$1/bin"
  busybox_links "$1/bin" sh nc wget sleep printf cat echo
}
standin_app() { scratch_image localhost/seckill-app-standin:busybox fill_app 'ENV PATH=/bin
CMD ["sleep", "3600"]'; }

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
