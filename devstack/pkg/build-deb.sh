#!/usr/bin/env bash
# Builds the Debian packages of dvms from this checkout:
#   dvms_VERSION_amd64.deb          /usr/bin/dvms, its systemd units, sysusers.d
#                                   and tmpfiles.d entries, the sample config,
#                                   bash completion and man page dvms(1)
#   python3-dvms-nova_VERSION_all.deb   the Nova weigher (dvms_nova)
# into OUTDIR (default /tmp/dvms-deb), and prints their paths.
#   usage: build-deb.sh [OUTDIR]
# VERSION is $DVMS_VERSION, else from git: a tag vX.Y.Z gives X.Y.Z (or
# X.Y.Z+gitN.gHASH N commits after it), no tag gives 0.0.0+gitDATE.HASH
# (the commit's date), with .dirty for uncommitted changes. The same string
# is the Go binary's (-X main.version: dvms --version, every agent's
# status and dvms_build_info), the packages' and the Python package's.
#
# Why a staged tree and dpkg-deb rather than a source package under debian/
# (dpkg-buildpackage, dh-golang): Debian's Go packaging builds with the
# distribution's Go (1.19 in Debian 12; dvms needs the go.mod's) from
# vendored or Debian-packaged modules, offline; dvms' modules come from the
# Go module proxy, as every other build of it does. nfpm would do what
# this script does, as one more tool to fetch and trust. Needs: go (go.mod's version),
# dpkg-deb, python3 with python3-setuptools and python3-pip (Debian's).
set -euo pipefail
export LC_ALL=C.UTF-8

top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-/tmp/dvms-deb}" && cd "${1:-/tmp/dvms-deb}" && pwd)
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
PYTHON=${DVMS_PKG_PYTHON:-/usr/bin/python3}
die() { echo "build-deb.sh: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian's dpkg)"
"$PYTHON" -c 'import setuptools, pip' 2>/dev/null || die "$PYTHON lacks setuptools or pip (apt-get install python3-setuptools python3-pip)"

# dvms_version: the build's version (see above).
dvms_version() {
  local d n
  if [ -n "${DVMS_VERSION:-}" ]; then
    echo "$DVMS_VERSION"
    return
  fi
  if d=$(git -C "$top" describe --tags --match 'v[0-9]*' --long 2>/dev/null); then
    # vX.Y.Z-N-gHASH
    n=${d%-g*}
    n=${n##*-}
    d=${d#v}
    if [ "$n" = 0 ]; then echo "${d%%-*}"; else echo "${d%%-*}+git$n.${d##*-}"; fi
  else
    echo "0.0.0+git$(git -C "$top" log -1 --format=%cd --date=format:%Y%m%d).$(git -C "$top" rev-parse --short=7 HEAD)"
  fi
}
version=$(dvms_version)
if [ -z "${DVMS_VERSION:-}" ] && ! git -C "$top" diff --quiet HEAD -- 2>/dev/null; then version="$version.dirty"; fi
case "$version" in [0-9]*) ;; *) die "version $version must start with a digit (Debian)" ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# deb_build DIR NAME: control fields from DIR/DEBIAN/control plus
# Installed-Size, md5sums, then dpkg-deb (files owned by root).
deb_build() {
  local dir=$1 name=$2
  (cd "$dir" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0r md5sum) > "$dir/DEBIAN/md5sums"
  echo "Installed-Size: $(du -sk --exclude=DEBIAN "$dir" | cut -f1)" >> "$dir/DEBIAN/control"
  find "$dir" -type d -exec chmod 0755 {} +
  dpkg-deb --root-owner-group -Zxz --build "$dir" "$out/${name}_${version}_$(sed -n 's/^Architecture: //p' "$dir/DEBIAN/control").deb" >/dev/null
  echo "$out/${name}_${version}_$(sed -n 's/^Architecture: //p' "$dir/DEBIAN/control").deb"
}

# ---- dvms ----
d="$work/dvms"
install -d "$d/DEBIAN" "$d/usr/bin" "$d/lib/systemd/system" "$d/usr/lib/sysusers.d" "$d/usr/lib/tmpfiles.d" \
  "$d/usr/share/dvms" "$d/usr/share/bash-completion/completions" "$d/usr/share/man/man1" "$d/usr/share/doc/dvms"
(cd "$top" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath \
  -ldflags "-s -w -X main.version=$version" -o "$d/usr/bin/dvms" ./cmd/dvms) || die "go build ./cmd/dvms"
got=$("$d/usr/bin/dvms" --version)
[ "$got" = "dvms version $version" ] || die "dvms --version says \"$got\", want \"dvms version $version\""
# The units name /usr/local/bin/dvms (a build from source, README.rst);
# the package's binary is /usr/bin/dvms.
for u in dvms-agent@.service dvms-scheduler-api.service; do
  sed 's|/usr/local/bin/dvms|/usr/bin/dvms|g' "$top/etc/systemd/$u" > "$d/lib/systemd/system/$u"
  grep -q '^ExecStart=/usr/bin/dvms ' "$d/lib/systemd/system/$u" || die "$u: ExecStart is not /usr/bin/dvms"
done
install -m 0644 "$top/etc/sysusers.d/dvms.conf" "$d/usr/lib/sysusers.d/dvms.conf"
install -m 0644 "$top/etc/tmpfiles.d/dvms.conf" "$d/usr/lib/tmpfiles.d/dvms.conf"
install -m 0644 "$top/etc/dvms/dvms.conf.sample" "$d/usr/share/dvms/dvms.conf.sample"
cp -r "$top/etc/dvms/policy" "$d/usr/share/dvms/policy"
install -m 0644 "$top/etc/grafana/dvms.json" "$d/usr/share/dvms/grafana-dvms.json"
"$d/usr/bin/dvms" completion bash > "$d/usr/share/bash-completion/completions/dvms"
"$d/usr/bin/dvms" man | gzip -9n > "$d/usr/share/man/man1/dvms.1.gz"
install -m 0644 "$top/README.rst" "$d/usr/share/doc/dvms/README.rst"
cat > "$d/usr/share/doc/dvms/copyright" <<EOT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: dvms
Source: https://github.com/dvms-project/dvms

Files: *
Copyright: the dvms authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOT
find "$d/usr/share" -type f -exec chmod 0644 {} +
cat > "$d/DEBIAN/control" <<EOT
Package: dvms
Version: $version
Architecture: amd64
Maintainer: dvms developers <dvms@localhost>
Section: admin
Priority: optional
Recommends: nats-server
Suggests: python3-dvms-nova
Homepage: https://github.com/dvms-project/dvms
Description: decentralized dynamic scheduler for OpenStack Nova
 Sidecar agents beside each nova-compute (dvms-agent@HOST) detect overload,
 underload and maintenance, agree over NATS and move servers through the
 Nova API; dvms scheduler-api (dvms-scheduler-api) orders nova-scheduler's
 candidate hosts by the demand the agents measure. Sample configuration:
 /usr/share/dvms/dvms.conf.sample (copy to /etc/dvms/dvms.conf).
EOT
cat > "$d/DEBIAN/postinst" <<'EOT'
#!/bin/sh
# dvms: the user dvms and /etc/dvms, /var/lib/dvms (sysusers.d, tmpfiles.d);
# running services restarted on upgrade. Nothing is enabled: the operator
# writes /etc/dvms/dvms.conf and its keys, then
# systemctl enable --now dvms-agent@HOST (and dvms-scheduler-api).
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null; then
    systemd-sysusers dvms.conf
  elif ! getent passwd dvms >/dev/null; then
    adduser --system --group --no-create-home --home /var/lib/dvms dvms
  fi
  if command -v systemd-tmpfiles >/dev/null; then
    systemd-tmpfiles --create dvms.conf
  else
    install -d -m 0750 -o root -g dvms /etc/dvms /etc/dvms/keys /etc/dvms/keys/operators
    install -d -m 0750 -o dvms -g dvms /var/lib/dvms
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    if [ -n "$2" ]; then
      systemctl try-restart dvms-scheduler-api.service 'dvms-agent@*.service' || true
    fi
  fi
fi
exit 0
EOT
cat > "$d/DEBIAN/prerm" <<'EOT'
#!/bin/sh
# dvms: stop the services when the package is removed (an agent hands back
# its partition role and records its migrations within [scheduler]
# stop_grace).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop dvms-scheduler-api.service 'dvms-agent@*.service' || true
fi
exit 0
EOT
cat > "$d/DEBIAN/postrm" <<'EOT'
#!/bin/sh
# dvms: purge removes its state (/var/lib/dvms); /etc/dvms (the operator's
# configuration and keys) and the user stay.
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
if [ "$1" = purge ]; then
  rm -rf /var/lib/dvms
fi
exit 0
EOT
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm" "$d/DEBIAN/postrm"
deb_build "$d" dvms

# ---- python3-dvms-nova ----
p="$work/python3-dvms-nova"
src="$work/nova-src"
install -d "$p/DEBIAN" "$p/usr/lib/python3/dist-packages" "$p/usr/share/doc/python3-dvms-nova" "$src"
cp -r "$top/nova/pyproject.toml" "$top/nova/README.rst" "$top/nova/dvms_nova" "$src/"
rm -rf "$src/dvms_nova/tests"
find "$src" -name __pycache__ -prune -exec rm -rf {} +
sed -i "s/^__version__ = .*/__version__ = '$version'/" "$src/dvms_nova/__init__.py"
# A wheel is the installed layout of a pure-Python package: unpacked into
# dist-packages (with its .dist-info: the oslo.config.opts entry point).
(cd "$work" && "$PYTHON" -m pip wheel --no-deps --no-build-isolation --no-index -q -w "$work/wheel" "$src") \
  || die "building the dvms_nova wheel (Debian's python3-setuptools, python3-pip)"
"$PYTHON" -m zipfile -e "$work"/wheel/dvms_nova-*.whl "$p/usr/lib/python3/dist-packages/"
ls "$p/usr/lib/python3/dist-packages/"dvms_nova-*.dist-info/entry_points.txt >/dev/null || die "the wheel has no entry_points.txt"
install -m 0644 "$top/nova/README.rst" "$p/usr/share/doc/python3-dvms-nova/README.rst"
install -m 0644 "$d/usr/share/doc/dvms/copyright" "$p/usr/share/doc/python3-dvms-nova/copyright"
find "$p/usr" -type f -exec chmod 0644 {} +
cat > "$p/DEBIAN/control" <<EOT
Package: python3-dvms-nova
Version: $version
Architecture: all
Maintainer: dvms developers <dvms@localhost>
Section: python
Priority: optional
Depends: python3 (>= 3.9), python3-nova, python3-oslo.config, python3-oslo.log
Homepage: https://github.com/dvms-project/dvms
Description: dvms weigher for the OpenStack Nova scheduler
 dvms_nova.weigher.DvmsWeigher asks dvms scheduler-api to order
 nova-scheduler's candidate hosts by the demand the dvms agents measure,
 and keeps Nova's order on any error. Its [dvms] options are listed by
 oslo-config-generator --namespace dvms_nova. python3 -m dvms_nova.policy
 writes the Nova policy of the agents' role.
EOT
cat > "$p/DEBIAN/postinst" <<'EOT'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v py3compile >/dev/null; then
  py3compile -p python3-dvms-nova
fi
exit 0
EOT
cat > "$p/DEBIAN/prerm" <<'EOT'
#!/bin/sh
set -e
if command -v py3clean >/dev/null; then
  py3clean -p python3-dvms-nova
else
  dpkg -L python3-dvms-nova | sed -n 's|\.py$|.pyc|p' | xargs -r rm -f
fi
exit 0
EOT
chmod 0755 "$p/DEBIAN/postinst" "$p/DEBIAN/prerm"
deb_build "$p" python3-dvms-nova
