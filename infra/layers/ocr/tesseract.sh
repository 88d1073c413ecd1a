#!/usr/bin/env bash
# Tesseract for the OCR layer and the local stack: `tesseract.sh ARCH LIB_DIR TESSDATA_DIR`.
#
# LIB_DIR gets libtesseract 5.5 and the libraries it needs (Leptonica, libpng, libjpeg,
# libtiff, libwebp, jbig) as the tesserocr wheel on PyPI bundles them for manylinux_2_28 —
# so they run on provided.al2023 — libtesseract itself as libtesseract.so.5 (the functions
# open it by that path; the others keep the names it needs them by, found beside it through
# its RPATH of $ORIGIN). TESSDATA_DIR gets the models of the languages Tesseract reads here
# (and English, read beside them): the traineddata of Debian's tesseract-ocr-<lang> packages,
# fetched from Debian's archive and checked against their SHA-256. ARCH is aarch64 (the
# functions) or x86_64. Licences: Tesseract and the tesserocr wheel Apache-2.0 and MIT,
# Leptonica BSD-2-Clause, the traineddata Apache-2.0, jbig-kit GPL-2.0-or-later (docs/ocr.md).
set -euo pipefail

TESSEROCR_VERSION=2.13.0
DEBIAN=http://deb.debian.org/debian/pool/main/t/tesseract-lang
# language  sha256 of tesseract-ocr-<language>_4.1.0-2_all.deb
PACKS="eng 9242d054563262398f8cf41fbd96fcc72f9dde70db16de18539882a6cff74f9d
rus 115f30363bacd85ba48f1e4d038f3d942e6d2afe271198ea3204bbf67ab2d3f1
ukr fb4f49c5866bf0d4ded9682f5a9fef484969f08ea399272d3d78fc8626e6af5d
ell d91e67c44817946d8109f85b8b3488e7c272d0a085e140629ec914ef9787fdd1
kor 2440d76b2c1570d7b42bc18dd2cc2f7b1a0e706e823dae9548358cc9bfb39701"

arch=$1 lib_dir=$2 tessdata_dir=$3
case "$arch" in
  aarch64|x86_64) ;;
  *) echo "tesseract.sh: ARCH must be aarch64 or x86_64, not $arch" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download --quiet --no-deps --only-binary=:all: --implementation cp --python-version 3.12 \
  --platform "manylinux_2_28_$arch" -d "$tmp" "tesserocr==$TESSEROCR_VERSION"
mkdir -p "$lib_dir" "$tessdata_dir"
python3 - "$(ls "$tmp"/tesserocr-*.whl)" "$lib_dir" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    libraries = [n for n in z.namelist() if n.startswith("tesserocr.libs/") and ".so" in n]
    if not any(os.path.basename(n).startswith("libtesseract-") for n in libraries):
        sys.exit(f"{wheel} bundles no libtesseract")
    for name in libraries:
        base = os.path.basename(name)
        target = "libtesseract.so.5" if base.startswith("libtesseract-") else base
        with open(os.path.join(out, target), "wb") as f:
            f.write(z.read(name))
PY

while read -r language sha256; do
  deb="$tmp/tesseract-ocr-$language.deb"
  curl -sSf --retry 3 -o "$deb" "$DEBIAN/tesseract-ocr-${language}_4.1.0-2_all.deb"
  python3 -c 'import hashlib, sys; sys.exit(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest() != sys.argv[2])' \
    "$deb" "$sha256" || { echo "tesseract.sh: $deb is not the package pinned" >&2; exit 1; }
  mkdir -p "$tmp/$language" && (cd "$tmp/$language" && ar x "$deb" && tar -xf data.tar.*)
  cp "$tmp/$language/usr/share/tesseract-ocr/5/tessdata/$language.traineddata" "$tessdata_dir/"
done <<<"$PACKS"
