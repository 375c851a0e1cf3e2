#!/usr/bin/env bash
# build.sh [TAG] builds the image of the kubernetes backend's sandbox pods
# (default terp-sandbox:debian12) with no image registry and no PyPI:
# debootstrap makes a minimal Debian bookworm root with python3, numpy,
# pandas, matplotlib and tini from Debian's packages, terp (built from this
# tree, static, -trimpath) goes to /usr/local/bin, uid 1000 is the user, and
# `docker import` turns the tree into an image whose entrypoint is
#   tini -- terp
# The SandboxTemplate runs it as `sandbox serve --isolation pod`; terp
# serve's Deployment runs the same image as `serve`.
#
# Needs root (debootstrap), a Debian mirror, Go and a Docker daemon; takes
# about three minutes. Set OUT=FILE to also write the image as a docker
# save archive (for `kind load image-archive`, `ctr images import`, or a
# push with skopeo), MIRROR to use another mirror, SNAPSHOT to a
# snapshot.debian.org date (e.g. 20260101T000000Z) to pin every package,
# REBUILD=1 to build over an image that exists.
set -euo pipefail

tag=${1:-terp-sandbox:debian12}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}
if [ -n "${SNAPSHOT:-}" ]; then
	mirror=http://snapshot.debian.org/archive/debian/$SNAPSHOT
fi

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag exists (REBUILD=1 builds it again)"
	[ -z "${OUT:-}" ] || docker save -o "$OUT" "$tag"
	exit 0
fi
for tool in debootstrap docker go; do
	if ! command -v "$tool" >/dev/null; then
		echo "build.sh: $tool is missing; on Debian/Ubuntu: sudo apt-get install debootstrap docker.io (and Go from go.dev)" >&2
		exit 1
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	echo "build.sh: debootstrap needs root; run: sudo $0 $*" >&2
	exit 1
fi

rootfs=$(mktemp -d /tmp/terp-sandbox-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm into $rootfs (about 3 minutes)"
debootstrap --variant=minbase \
	--include=python3,python3-numpy,python3-pandas,python3-matplotlib,tini \
	bookworm "$rootfs" "$mirror"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*
chroot "$rootfs" python3 -c 'import numpy, pandas, matplotlib'
chroot "$rootfs" prlimit --version >/dev/null

# The user the code and the servers run as (runAsUser: 1000), and the
# mount points the pod fills: /work and /mnt/data (one emptyDir), /tmp.
echo "sandbox:x:1000:1000:terp sandbox:/tmp:/bin/sh" >>"$rootfs/etc/passwd"
echo "sandbox:x:1000:" >>"$rootfs/etc/group"
mkdir -p "$rootfs/work" "$rootfs/mnt/data"
chown 1000:1000 "$rootfs/work" "$rootfs/mnt/data" # what a volume mounted there starts as
chmod 1777 "$rootfs/tmp"

echo "building terp"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/terpdev/terp/internal/cli.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
	-o "$rootfs/usr/local/bin/terp" ./cmd/terp)

# Every file dated alike, so two builds of the same packages and tree differ
# only where the packages do.
epoch=${SOURCE_DATE_EPOCH:-$(cd "$repo" && git log -1 --format=%ct 2>/dev/null || echo 0)}
find "$rootfs" -xdev -newermt "@$epoch" -exec touch -h -d "@$epoch" {} + 2>/dev/null || true

tar -C "$rootfs" --sort=name --numeric-owner -c . | docker import \
	--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'USER 1000:1000' \
	--change 'WORKDIR /work' \
	--change 'EXPOSE 8377' \
	--change 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/terp"]' \
	--change 'CMD ["sandbox", "serve", "--isolation", "pod", "--listen", "0.0.0.0:8377", "--allow-remote"]' \
	- "$tag"
echo "built $tag"
[ -z "${OUT:-}" ] || { docker save -o "$OUT" "$tag" && echo "wrote $OUT"; }
