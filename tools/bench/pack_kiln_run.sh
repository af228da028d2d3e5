#!/usr/bin/env bash
# Copies kiln-run into DIR/bin with every shared library it links except
# glibc's own (OpenBLAS, gfortran, libstdc++...) into DIR/lib, behind a
# wrapper that points the loader there: the GPU machine's image is not Debian
# 12 and has no Kiln packages. CUDA's libraries (driver, NVRTC, cuBLASLt,
# cuDNN) are not packed: kiln-run dlopens the GPU machine's own. Binaries are
# stripped and libraries over 8 MiB (OpenBLAS, 35 MiB) gzipped, which the
# wrapper unpacks on its first run: the device tool carries 64 MiB in all, the
# repository's tracked files included.
#   tools/bench/pack_kiln_run.sh KILN_RUN DIR
# Used by tools/bench/gpu_bundle.sh and tools/gpu/check.sh.
set -euo pipefail
kiln_run=$1 dir=$2
mkdir -p "$dir/bin" "$dir/lib"
cp "$kiln_run" "$dir/bin/kiln-run.real"
strip --strip-unneeded "$dir/bin/kiln-run.real"
ldd "$kiln_run" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$dir/lib/" ;;
  esac
done
for lib in "$dir"/lib/*; do
  strip --strip-unneeded "$lib"
  [ "$(stat -c %s "$lib")" -gt $(( 8 * 1024 * 1024 )) ] && gzip -1 "$lib"
done
cat > "$dir/bin/kiln-run" <<'WRAP'
#!/bin/sh
# kiln-run with the libraries packed beside it (tools/bench/pack_kiln_run.sh).
d=$(dirname "$0")
# Libraries packed gzipped: unpacked once, each through a file of this
# process's own, so that ranks starting together cannot read a half-written one.
for z in "$d"/../lib/*.gz; do
  [ -e "$z" ] || continue
  gzip -dc "$z" > "$z.$$" && mv "$z.$$" "${z%.gz}" && rm -f "$z"
done
LD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/kiln-run.real" "$@"
WRAP
chmod +x "$dir/bin/kiln-run"
