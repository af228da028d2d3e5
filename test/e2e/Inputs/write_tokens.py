"""Writes token files in the formats kiln-run reads, for the end-to-end lit tests.

  write_tokens.py FORMAT OUT [--from TEXT | --count N --seed S] [corruptions]

FORMAT is gpt2 (llm.c: 256 little-endian int32 header, magic 20240520, version 1,
uint16 tokens), llama3 (magic 20240801, version 7, uint32 tokens) or nanogpt
(headerless uint16, as nanoGPT's prepare.py writes train.bin). The tokens are the
bytes of TEXT (so they match byte-level text and tiny_gpt's vocabulary of 256) or
N pseudo-random ids below 256.

Corruptions, each for one negative test:
  --magic M / --version V   header fields other than the format's own
  --header-count C          header[2] other than the real token count
  --set-token I=V           token I is V (e.g. an id outside the vocabulary)
  --extra-bytes K           K stray bytes after the tokens (an odd-sized nanoGPT file)
"""
import argparse
import random
import struct

FORMATS = {
    # name: (magic, version, struct code of one token)
    "gpt2": (20240520, 1, "H"),
    "llama3": (20240801, 7, "I"),
    "nanogpt": (None, None, "H"),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("format", choices=sorted(FORMATS))
    parser.add_argument("out")
    parser.add_argument("--from", dest="text")
    parser.add_argument("--count", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--magic", type=int)
    parser.add_argument("--version", type=int)
    parser.add_argument("--header-count", type=int)
    parser.add_argument("--set-token", action="append", default=[])
    parser.add_argument("--extra-bytes", type=int, default=0)
    args = parser.parse_args()

    magic, version, code = FORMATS[args.format]
    if args.text:
        tokens = list(open(args.text, "rb").read())
    else:
        rng = random.Random(args.seed)
        tokens = [rng.randrange(256) for _ in range(args.count)]
    for assignment in args.set_token:
        index, value = (int(x) for x in assignment.split("="))
        tokens[index] = value

    body = struct.pack("<%d%s" % (len(tokens), code), *tokens)
    header = b""
    if magic is not None:
        count = len(tokens) if args.header_count is None else args.header_count
        fields = [
            magic if args.magic is None else args.magic,
            version if args.version is None else args.version,
            count,
        ]
        header = struct.pack("<256i", *(fields + [0] * 253))
    with open(args.out, "wb") as f:
        f.write(header + body + bytes(args.extra_bytes))


if __name__ == "__main__":
    main()
