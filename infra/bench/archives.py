"""Sluice's archive check against the reference product's way of reading an archive, in one run.

Generates, with Python's own zipfile and tarfile: a 5,000-entry archive (100 folders and
4,900 files of 41,400 bytes: 193.5 MiB unpacked, about 80 times its packed size, so
inside every limit) as .zip and as .tar.gz; and a 42 KB overlapping-file bomb built the way
David Fifield's zbsm.zip is (each member's deflate stream quotes the next member's local
header in a stored block and runs on into one shared kernel, so 20 members each inflate
~41 MB of zeros). Then times, each in its own process under GNU time (peak RSS):
`sluice parse FILE` (release build: the whole upload check, worker process included) and
the reference baseline, Python's zipfile/tarfile opening every member and reading it in
64 KiB chunks. Prints a Markdown table. Run with `infra/local/bench-archives`.
"""

import io
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib

REPEATS = 3
FILE_BYTES = 41_400


def member_bytes(index):
    # 400 bytes that do not compress, then zeros: each member packs to about 500 bytes.
    return os.urandom(400) + bytes(FILE_BYTES - 400)


def generate_benign(folder):
    zip_path = os.path.join(folder, "repo.zip")
    tar_path = os.path.join(folder, "repo.tar.gz")
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z, \
            tarfile.open(tar_path, "w:gz", compresslevel=6) as t:
        for d in range(100):
            name = f"repo/pkg{d:03d}/"
            z.writestr(name, b"")
            info = tarfile.TarInfo(name.rstrip("/"))
            info.type = tarfile.DIRTYPE
            t.addfile(info)
            for f in range(49):
                data = member_bytes(d * 49 + f)
                path = f"repo/pkg{d:03d}/module{f:02d}.py"
                z.writestr(path, data)
                info = tarfile.TarInfo(path)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return zip_path, tar_path


def local_header(name, crc, packed, size):
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, packed, size, len(name), 0) + name


def generate_bomb(folder, members=20, kernel_zeros=41_000_000):
    """An overlapping-file bomb in Fifield's construction (every member a valid deflate stream)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = compressor.compress(bytes(kernel_zeros)) + compressor.flush()
    names = [f"part{i:02d}.bin".encode() for i in range(members)]
    header_len = [30 + len(n) for n in names]
    # Member i's data: a stored block quoting header i+1, member i+1's data, ..., the kernel.
    packed = [0] * members
    size = [0] * members
    for i in reversed(range(members)):
        if i == members - 1:
            packed[i], size[i] = len(kernel), kernel_zeros
        else:
            packed[i] = 5 + header_len[i + 1] + packed[i + 1]
            size[i] = header_len[i + 1] + size[i + 1]
    # Headers do not depend on CRCs for their length, so build them with the CRCs last.
    crc = [0] * members
    headers = [local_header(names[i], 0, packed[i], size[i]) for i in range(members)]
    zeros = bytes(kernel_zeros)
    # The CRC of each member's output; headers after it are CRC-free until all are known,
    # so compute from the last member (whose output is the kernel alone) forwards.
    for i in reversed(range(members)):
        running = 0
        for h in range(i + 1, members):
            running = zlib.crc32(headers[h], running)
        crc[i] = zlib.crc32(zeros, running)
        headers[i] = local_header(names[i], crc[i], packed[i], size[i])
    body, offsets = b"", []
    for i in range(members):
        offsets.append(len(body))
        body += headers[i]
        if i + 1 < members:
            body += struct.pack("<BHH", 0, header_len[i + 1], header_len[i + 1] ^ 0xFFFF)
    body += kernel
    directory = b""
    for i in range(members):
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc[i], packed[i], size[i],
                                 len(names[i]), 0, 0, 0, 0, 0, offsets[i]) + names[i]
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members, members, len(directory), len(body), 0)
    path = os.path.join(folder, "overlap.zip")
    with open(path, "wb") as f:
        f.write(body + directory + end)
    return path


REFERENCE = {
    "zip": "import zipfile,sys\nn=0\nwith zipfile.ZipFile(sys.argv[1]) as z:\n for i in z.infolist():\n  with z.open(i) as f:\n   while b:=f.read(65536): n+=len(b)\nprint(n)",
    "tar.gz": "import tarfile,sys\nn=0\nwith tarfile.open(sys.argv[1],'r:gz') as t:\n for m in t:\n  f=t.extractfile(m)\n  if f:\n   while b:=f.read(65536): n+=len(b)\nprint(n)",
}


def measure(command, env=None):
    """Best wall time of REPEATS runs, the largest peak RSS (MiB) and the last output line."""
    best, peak, out = None, 0, ""
    for _ in range(REPEATS):
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, env=env, check=False)
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
        peak = max(peak, int(done.stderr.decode().strip().splitlines()[-1]) / 1024)
        lines = (done.stdout.decode().strip() or done.stderr.decode().strip().splitlines()[-2]).splitlines()
        out = lines[-1] if lines else ""
    return best, peak, out


def verdict(output):
    if output.startswith("{"):
        import json
        v = json.loads(output)
        return v["verdict"] + (f" ({v['reason']})" if v.get("reason") else f", {v.get('members')} members")
    return f"read {int(output) / 1048576:,.0f} MiB" if output.isdigit() else output[:60]


def main():
    sluice = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        zip_path, tar_path = generate_benign(folder)
        bomb = generate_bomb(folder)
        print("| archive | packed | reference (baseline) | verdict | peak MiB | Sluice `sluice parse` | verdict | peak MiB | speed ratio |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, path, kind in [("5,000 entries, 193.5 MiB unpacked", zip_path, "zip"),
                                  ("5,000 entries, 193.5 MiB unpacked", tar_path, "tar.gz"),
                                  ("overlapping-file bomb, 20 x 41 MB", bomb, "zip")]:
            ref_time, ref_peak, ref_out = measure([sys.executable, "-c", REFERENCE[kind], path])
            our_time, our_peak, our_out = measure([sluice, "parse", path])
            size = os.path.getsize(path)
            packed = f"{size / 1048576:.1f} MiB" if size > 1048576 else f"{size / 1024:.0f} KB"
            name = "zipfile" if kind == "zip" else "tarfile"
            print(f"| {kind}: {label} | {packed} | Python {name} {ref_time:.2f} s | {verdict(ref_out)} | {ref_peak:.0f} "
                  f"| {our_time:.3f} s | {verdict(our_out)} | {our_peak:.0f} | {ref_time / our_time:.1f}x |")


if __name__ == "__main__":
    main()
