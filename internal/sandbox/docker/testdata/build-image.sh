#!/usr/bin/env bash
# build-image.sh [TAG] builds the Docker image the tests run (default
# terp-python:debian12) from Debian's own packages, with no image registry
# and no PyPI: debootstrap makes a minimal bookworm root with python3,
# numpy, pandas and matplotlib, and `docker import` turns it into an image.
# It takes about three minutes and needs root (debootstrap), the Debian
# mirror and a Docker daemon. An image that already exists is kept; set
# REBUILD=1 to build it again. MIRROR overrides the Debian mirror.
set -euo pipefail

tag=${1:-terp-python:debian12}
mirror=${MIRROR:-http://deb.debian.org/debian}

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
	echo "$tag exists (REBUILD=1 builds it again)"
	exit 0
fi
for tool in debootstrap docker; do
	if ! command -v "$tool" >/dev/null; then
		echo "build-image.sh: $tool is missing; on Debian/Ubuntu: sudo apt-get install debootstrap docker.io" >&2
		exit 1
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	echo "build-image.sh: debootstrap needs root; run: sudo $0 $*" >&2
	exit 1
fi

rootfs=$(mktemp -d /tmp/terp-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm into $rootfs (about 3 minutes)"
debootstrap --variant=minbase \
	--include=python3,python3-numpy,python3-pandas,python3-matplotlib \
	bookworm "$rootfs" "$mirror"
# What only the build needed: the package cache and lists.
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
chroot "$rootfs" python3 -c 'import numpy, pandas, matplotlib'

tar -C "$rootfs" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'CMD ["python3"]' \
	- "$tag"
echo "built $tag"
