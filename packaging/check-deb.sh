#!/usr/bin/env bash
# Builds the Debian package from the debug binary (the contents are what is checked, not the
# code's speed) and checks it holds what packaging/INSTALL.md promises.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the check packages the debug binary, which later versions may refuse.
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked --version 3.8.0 >/dev/null
command -v dpkg-deb >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq dpkg >/dev/null; }

out="$(mktemp -d)"
cargo build -q --bin shopcell
cargo deb --profile dev --no-build --fast --output "$out/shopcell.deb" >/dev/null 2>&1
contents="$(dpkg-deb --contents "$out/shopcell.deb")"
for path in ./usr/bin/shopcell ./etc/default/shopcell ./usr/share/doc/shopcell/INSTALL.md; do
    grep -q " $path\$" <<<"$contents" || { echo "the package lacks $path"; exit 1; }
done
grep -Eq " \./(usr/)?lib/systemd/system/shopcell\.service\$" <<<"$contents" || { echo "the package lacks the systemd unit"; exit 1; }
grep -q "rwxr-xr-x .* \./usr/bin/shopcell\$" <<<"$contents" || { echo "/usr/bin/shopcell is not 0755"; exit 1; }

control="$out/control"
dpkg-deb --control "$out/shopcell.deb" "$control"
grep -q "^/etc/default/shopcell\$" "$control/conffiles" || { echo "/etc/default/shopcell is not a conffile"; exit 1; }
grep -q "adduser --system" "$control/postinst" || { echo "postinst makes no system user"; exit 1; }
grep -q "install -d -m 0700 -o shopcell" "$control/postinst" || { echo "postinst makes no 0700 data directory"; exit 1; }
grep -q "systemctl" "$control/postinst" || { echo "postinst does not enable the unit"; exit 1; }
grep -q "^Depends:.*adduser" "$control/control" || { echo "the package does not depend on adduser"; exit 1; }
echo "package contents ok: $(dpkg-deb --field "$out/shopcell.deb" Package Version Architecture | tr '\n' ' ')"
rm -rf "$out"
