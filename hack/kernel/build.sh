#!/usr/bin/env bash
# make kernel: Cairn's own kernel, built from Debian's kernel source with Debian's configuration, trimmed
# to the drivers and features the image ships and with every one of them built in. A node booted from it
# loads no module: under emulation each module load costs tens to hundreds of milliseconds on the boot's
# path (read, relocated, its signature checked), and the disk controllers' drivers must all be in before
# the node can look for its STATE disk.
#
# Output: _out/kernel/root/boot/vmlinuz-VERSION and _out/kernel/root/lib/modules/VERSION (modules.builtin,
# an empty modules.dep), which `make image KERNEL_ROOT=_out/kernel/root` ships instead of Debian's kernel.
# Debian's kernel stays the default and the one make test boots: this one took 43 minutes to build on two
# cores, which CI's time does not fit beside the tests. A rebuild with an unchanged configuration is
# incremental.
#
# How the configuration is made, in order:
#   1. Debian's configuration of the installed kernel (linux-image-amd64), so every option Debian turns on
#      for a general machine stays as it is;
#   2. the kernel's own streamline_config.pl turns off every module the image does not ship (the list is
#      mkimage -list-modules: InitModules, RootfsModules and RequestModules with their dependencies and
#      softdeps);
#   3. what remains as a module is built in;
#   4. every option kernel-config/cairn.config lists is turned on (built in);
#   5. no debug information, and no module signing key from Debian's build (none is loaded);
#   6. kernel-config/cairn.config is checked against the result (kernel-check), and the build stops if an
#      option Cairn needs is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=_out/kernel
./hack/deps.sh image kernel

debian=$(ls /boot/config-* | sort -V | tail -1)
tarball=$(ls /usr/src/linux-source-*.tar.xz | sort -V | tail -1)
name=$(basename "$tarball" .tar.xz)
src=$out/$name
mkdir -p "$out"
if [[ ! -f $src/.unpacked || $src/.unpacked -ot $tarball ]]; then
	echo "kernel: unpacking $tarball"
	rm -rf "$src"
	tar -C "$out" -xf "$tarball"
	touch "$src/.unpacked"
fi

echo "kernel: configuring from $debian and the modules the image ships"
(
	echo "Module Size Used by"
	go run ./image/cmd/mkimage -list-modules | awk '{print $1, 0, 0}'
) >"$out/ships.lsmod"
# A configuration that comes out the same keeps its time, so make rebuilds nothing for it.
[[ ! -f $src/.config ]] || cp -p "$src/.config" "$out/config.previous"
cp "$debian" "$src/.config"
(cd "$src" && LSMOD="$repo/$out/ships.lsmod" perl scripts/kconfig/streamline_config.pl >.config.streamlined 2>"$repo/$out/streamline.log")
sed 's/=m$/=y/' "$src/.config.streamlined" >"$src/.config"
(
	cd "$src"
	# shellcheck disable=SC2046
	./scripts/config $(sed -nE 's/^CONFIG_([A-Z0-9_]+)=[ym]$/--enable \1/p' "$repo/kernel-config/cairn.config") \
		--set-str LOCALVERSION "-cairn" --disable LOCALVERSION_AUTO \
		--set-str SYSTEM_TRUSTED_KEYS "" --set-str SYSTEM_REVOCATION_KEYS "" \
		--disable MODULE_SIG_ALL --set-str MODULE_SIG_KEY "certs/signing_key.pem" \
		--disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT --disable DEBUG_INFO_DWARF4 --disable DEBUG_INFO_DWARF5 \
		--disable DEBUG_INFO_BTF --enable DEBUG_INFO_NONE
	make -s olddefconfig
)
if [[ -f $out/config.previous ]] && cmp -s "$out/config.previous" "$src/.config"; then
	touch -r "$out/config.previous" "$src/.config"
fi
go run ./kernel-config/cmd/kernel-check "$src/.config"

echo "kernel: building (make -j$(nproc) bzImage modules; kbuild prints each file as it goes)"
(cd "$src" && make -j"$(nproc)" bzImage modules)
release=$(cd "$src" && make -s kernelrelease)
rm -rf "$out/root"
mkdir -p "$out/root/boot"
(cd "$src" && make -s modules_install INSTALL_MOD_PATH="$repo/$out/root" INSTALL_MOD_STRIP=1)
rm -f "$out/root/lib/modules/$release/build" "$out/root/lib/modules/$release/source"
cp "$src/arch/x86/boot/bzImage" "$out/root/boot/vmlinuz-$release"
cp "$src/.config" "$out/root/boot/config-$release"
echo "kernel: $out/root/boot/vmlinuz-$release ($(stat -c %s "$out/root/boot/vmlinuz-$release") bytes); module files: $(find "$out/root/lib/modules/$release" -name '*.ko*' | wc -l) (Kconfig keeps a few options as modules; the image ships none of them)"
echo "kernel: build an image with it: make image KERNEL_ROOT=$out/root"
