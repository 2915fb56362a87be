#!/bin/sh
# Installs the Debian packages a target needs, when they are missing. `make` calls it before building or
# testing so that `make run` and `make test` work on a fresh Debian 12 machine. Usage: deps.sh GROUP...
set -eu
pkgs=""
for group in "$@"; do
	case "$group" in
	build) pkgs="$pkgs protobuf-compiler libprotobuf-dev" ;; # libprotobuf-dev: the well-known types (timestamp.proto) `make api` imports
	test) pkgs="$pkgs xfsprogs e2fsprogs dosfstools mtools systemd-boot-efi btrfs-progs cryptsetup-bin lvm2 mdadm gdisk fdisk squashfs-tools xorriso util-linux iproute2 kmod" ;;
	image) pkgs="$pkgs linux-image-amd64 squashfs-tools erofs-utils xorriso mtools grub-pc-bin grub-efi-amd64-bin systemd-boot-efi binutils gdisk zstd xfsprogs e2fsprogs dosfstools cryptsetup-bin iptables" ;;
	bundle) pkgs="$pkgs libseccomp-dev gcc libc6-dev pkg-config nftables iptables" ;; # nft and iptables: the kube-proxy and flannel images carry them
	kernel) pkgs="$pkgs linux-source bison flex bc libelf-dev libssl-dev gcc make perl kmod xz-utils" ;; # make kernel: Debian's kernel source and what building it takes
	cgo) pkgs="$pkgs gcc libc6-dev" ;; # the race detector of the unit tests
	qemu) pkgs="$pkgs qemu-system-x86 qemu-utils ovmf swtpm dosfstools mtools" ;; # dosfstools, mtools: NoCloud seeds (cluster create --userdata)
	# The conformance suite's test images take these programs with their libraries (make conformance).
	conformance) pkgs="$pkgs busybox-static bind9-dnsutils nginx-light curl libc-bin netcat-openbsd bash" ;;
	*) echo "deps.sh: unknown group $group" >&2; exit 2 ;;
	esac
done
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing Debian packages:$missing" >&2
	echo "install them with: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packages are installed for their programs, never to run as this machine's services (nginx would start on
# port 80): policy-rc.d says no to every service start for the length of the install.
rc_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && rc_policy=1
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
[ -z "$rc_policy" ] || rm -f /usr/sbin/policy-rc.d
