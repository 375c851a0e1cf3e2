#!/usr/bin/env bash
# Runs the adversarial suite as an unprivileged user (nobody), the way most
# people run terp, after `make test` ran it as root. The Docker cases need
# the daemon's socket, which is root's, so they run in the root pass only.
# Usage: run-unprivileged.sh [extra test flags]
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ "$(id -u)" -ne 0 ]; then
	echo "already unprivileged (uid $(id -u)): the root pass is the one to add; run go test ./internal/adversarial/ as root"
	exec go test ./internal/adversarial/ "$@"
fi
dir=$(mktemp -d /tmp/terp-unprivileged-XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
go test -c -o "$dir/adversarial.test" ./internal/adversarial/
go build -o "$dir/terp" ./cmd/terp
mkdir "$dir/home"
chown 65534:65534 "$dir/home"
cd "$dir"
echo "running the adversarial suite as nobody (uid 65534)"
setpriv --reuid=65534 --regid=65534 --clear-groups \
	env -i PATH=/usr/bin:/bin HOME="$dir/home" TMPDIR=/tmp TERP_TEST_BINARY="$dir/terp" \
	"$dir/adversarial.test" -test.skip 'Docker' -test.count=1 "$@"
