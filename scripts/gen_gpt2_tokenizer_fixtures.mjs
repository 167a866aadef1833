#!/usr/bin/env node
// Write tests/fixtures/gpt2_tokenizer/*: what tiktoken's `gpt2` encoding (npm `tiktoken`,
// the Rust core compiled to WASM) gives for attn's GPT-2 tokenizer tests.
//
//   node scripts/gen_gpt2_tokenizer_fixtures.mjs --node-modules /work/scratch-node/node_modules \
//        [--data /work/shared/data] [--out tests/fixtures/gpt2_tokenizer]
//
// --node-modules is a node_modules folder holding `tiktoken` (else NODE_PATH is searched).
// Inputs: tests/fixtures/gpt2_tokenizer/stress.txt and stress_invalid.bin (committed,
// hand-written), and the-verdict.txt / tinyshakespeare.txt from --data (never committed:
// only their ids and md5s are). See tests/fixtures/gpt2_tokenizer/README.md.
import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
function arg(name, dflt) {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
}
const nodeModules = arg("--node-modules", "");
const dataDir = path.resolve(arg("--data", "/work/shared/data"));
const inDir = path.join(here, "..", "tests", "fixtures", "gpt2_tokenizer"); // stress inputs
const outDir = path.resolve(arg("--out", inDir));

let require_ = createRequire(import.meta.url);
let tiktokenDir;
if (nodeModules) {
  require_ = createRequire(path.join(path.resolve(nodeModules), "_resolve_from_here.js"));
}
let tiktoken;
try {
  tiktoken = require_("tiktoken");
  tiktokenDir = path.dirname(require_.resolve("tiktoken")); // "exports" hides package.json
} catch (e) {
  // NODE_PATH is honoured by require() from a CommonJS module only.
  const r = createRequire(path.join(process.cwd(), "_x.js"));
  tiktoken = r("tiktoken");
  tiktokenDir = path.dirname(r.resolve("tiktoken"));
}
const tiktokenVersion = JSON.parse(fs.readFileSync(path.join(tiktokenDir, "package.json"))).version;
const enc = tiktoken.get_encoding("gpt2");

const md5 = (buf) => createHash("md5").update(buf).digest("hex");
const utf8 = (s) => Buffer.from(s, "utf8");
const hex = (u8) => Buffer.from(u8).toString("hex");
const arr = (u32) => Array.from(u32);

// The three ways of treating "<|endoftext|>" in the input text (tiktoken npm 1.x API:
// encode(text, allowed_special?: "all" | string[], disallowed_special?: "all" | string[])):
//  * allowed:  encode(text, "all")      -> "<|endoftext|>" becomes id 50256
//  * ordinary: encode(text, [], [])     -> it is plain text (27, 91, 437, 1659, 5239, 91, 29);
//              the same as encode_ordinary(text) (checked below for every input)
//  * default:  encode(text)             -> throws if the text contains "<|endoftext|>"
//              (allowed_special defaults to none, disallowed_special to "all"), as Python's
//              tiktoken raises ValueError
const encAll = (t) => arr(enc.encode(t, "all"));
const encOrd = (t) => {
  const a = arr(enc.encode(t, [], []));
  const b = arr(enc.encode_ordinary(t));
  if (a.length !== b.length || a.some((v, i) => v !== b[i])) throw new Error("encode(t,[],[]) != encode_ordinary");
  return a;
};
const encDefaultThrows = (t) => {
  try { enc.encode(t); return false; } catch (e) { return true; }
};
function roundTrip(t, ids) {
  const got = Buffer.from(enc.decode(Uint32Array.from(ids)));
  if (!got.equals(utf8(t))) throw new Error("decode(encode(t)) != t for " + JSON.stringify(t).slice(0, 80));
}
function u16bin(ids) {
  const b = Buffer.alloc(ids.length * 2);
  ids.forEach((v, i) => {
    if (v > 0xffff) throw new Error("id over 16 bits");
    b.writeUInt16LE(v, i * 2);
  });
  return b;
}
function rle(ids) {
  const out = [];
  for (const v of ids) {
    if (out.length && out[out.length - 1][0] === v) out[out.length - 1][1]++;
    else out.push([v, 1]);
  }
  return out;
}
const write = (name, data) => fs.writeFileSync(path.join(outDir, name), data);
// Indented JSON, with arrays of numbers (and of short hex strings) kept on one line.
const writeJSON = (name, obj) =>
  write(name, JSON.stringify(obj, null, 1).replace(/\[\s*\n[^\[\]{}]*?\]/g,
    (m) => (/^\[\s*("[0-9a-f]*"|-?\d+)(,\s*("[0-9a-f]*"|-?\d+))*\s*\]$/.test(m) ? m.replace(/\s+/g, "") : m)) + "\n");
const manifest = {
  generator: "scripts/gen_gpt2_tokenizer_fixtures.mjs",
  tiktoken_npm_version: tiktokenVersion,
  node_version: process.version,
  encoding: enc.name,
  files: {},
};

// ---- 1. stress.txt ------------------------------------------------------------------
{
  const buf = fs.readFileSync(path.join(inDir, "stress.txt"));
  const text = buf.toString("utf8");
  if (!utf8(text).equals(buf)) throw new Error("stress.txt is not valid UTF-8");
  const all = encAll(text), ord = encOrd(text);
  roundTrip(text, all); roundTrip(text, ord);
  writeJSON("stress_expected.json", {
    input: "stress.txt", input_md5: md5(buf), input_bytes: buf.length,
    default_encode_throws: encDefaultThrows(text),
    ids_allowed_special: all,
    ids_ordinary: ord,
  });
}

// ---- 2. stress_invalid.bin: no reference ids (see README); record only its facts ------
{
  const buf = fs.readFileSync(path.join(inDir, "stress_invalid.bin"));
  let valid = true;
  try { new TextDecoder("utf-8", { fatal: true }).decode(buf); } catch (e) { valid = false; }
  if (valid) throw new Error("stress_invalid.bin should not be valid UTF-8");
  manifest.files["stress_invalid.bin"] = { md5: md5(buf), bytes: buf.length, expected_ids: null };
}

// ---- 3. the corpora: ids as little-endian uint16, md5 of the input in the manifest -----
for (const [name, file] of [["the_verdict", "the-verdict.txt"], ["tinyshakespeare", "tinyshakespeare.txt"]]) {
  const buf = fs.readFileSync(path.join(dataDir, file));
  const text = buf.toString("utf8");
  const all = encAll(text), ord = encOrd(text);
  const same = all.length === ord.length && all.every((v, i) => v === ord[i]);
  roundTrip(text, all);
  const bin = u16bin(all);
  write(`${name}.u16.bin`, bin);
  manifest.files[`${name}.u16.bin`] = {
    input: file, input_md5: md5(buf), input_bytes: buf.length,
    mode: "encode(text, \"all\")", same_as_ordinary: same,
    n_ids: all.length, md5: md5(bin), first_ids: all.slice(0, 16), last_ids: all.slice(-16),
  };
}

// ---- 4. long runs of one character ----------------------------------------------------
{
  const runs = [];
  const N = 10 * 1000 * 1000;
  // tiktoken (npm 1.0.22, and the same Rust core in Python's tiktoken) aborts with a WASM
  // panic ("RuntimeError: unreachable") on any regex piece of about 1,000,000 characters or
  // more (900,000 spaces work, 1,000,000 do not; same for letters and digits), so the 10 MB
  // runs cannot be measured: they are derived below, and the longest measurable runs are
  // recorded from tiktoken for comparison.
  // ' ' x n: GPT-2 has no token of two or more spaces (no merge "Ġ Ġ"), so every space is
  // token 220 however the regex splits the run.
  for (const n of [1, 2, 3, 1000, 900000]) {
    const ids = arr(enc.encode(" ".repeat(n), "all"));
    runs.push({ char: " ", count: n, source: "tiktoken", n_ids: ids.length,
                md5_u16le: md5(u16bin(ids)), rle: rle(ids) });
  }
  {
    const ids = new Array(N).fill(220);
    runs.push({ char: " ", count: N, source: "derived from the merge list (see README), not tiktoken",
                n_ids: ids.length, md5_u16le: md5(u16bin(ids)), rle: rle(ids) });
  }
  // 'a' x n measured with tiktoken for n up to ~100k: tiktoken's merge loop is quadratic in
  // the piece's length (about 12 s at 100 kB, 2 min at 300 kB here), so 10 MB is out of reach.
  for (const n of [1, 2, 3, 4, 5, 6, 7, 8, 9, 1000, 1001, 1002, 1003, 100000, 100001, 100002, 100003]) {
    const ids = arr(enc.encode("a".repeat(n), "all"));
    runs.push({ char: "a", count: n, source: "tiktoken", n_ids: ids.length,
                md5_u16le: md5(u16bin(ids)), rle: rle(ids) });
  }
  // 'a' x 10,000,000 derived, not measured: the only all-'a' tokens are a(64) aa(7252)
  // aaa(46071) aaaa(24794), made by the merges "a a" (rank 6996), "aa aa" (24538) and
  // "aa a" (45815); none has "aaaa" as a part. BPE applies "a a" left to right over the
  // whole run (n even: 'aa' x n/2), then "aa aa" (n/2 even: 'aaaa' x n/4), then nothing
  // more can merge. The measured runs above (n = 1000 .. 100003) follow the same rule.
  {
    const ids = new Array(N / 4).fill(24794);
    runs.push({ char: "a", count: N, source: "derived from the merge list (see README), not tiktoken",
                n_ids: ids.length, md5_u16le: md5(u16bin(ids)), rle: rle(ids) });
  }
  writeJSON("long_runs.json", runs);
}

// ---- 5. short cases -------------------------------------------------------------------
{
  const texts = [];
  const add = (...ts) => { for (const t of ts) if (!texts.includes(t)) texts.push(t); };
  add("");
  for (let c = 0; c < 0x100; c++) add(String.fromCodePoint(c)); // every byte value's char
  add("Hello, world!", "hello world", " Hello", "Hello", "HELLO", "The", " the", "the the the",
      "  leading spaces", "trailing   ", "   ", "  ", " ", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n",
      "\t", "\t\t", " \t \n ", "a\n\n\nb", "a \n", "a  ", " a", "  a", "   a", "a\tb", "a\t\tb",
      "a \t b", "a\r\nb", "a\rb", "a\u000bb", "a\u000cb", "x \n y", "word   \n", "word\n   ",
      "a b", "a  b", "a   b", "a    b", "a     b", "a      b", "a\u00a0b", "a\u3000b", "a\u2003b",
      "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u1680", "\u200b", "\ufeff", "\u00ad",
      "a\u200bb", "\ufeffhello",
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
      "'Re", "'rE", "'Ll", "’s", "’t", "’re", "’ll", "I'm", "I’m", "don't", "DON'T", "Don'T",
      "it's", "IT'S", "you're", "we've", "I'll", "he'd", "they'RE", "'", "''", "'''s", "''s",
      "'sss", "'lll", "'red", "x's", "s's", " 's", " 'll", "rock'n'roll", "o'clock", "'tis",
      "’", "‘quoted’", "\"quoted\"", "«guillemets»",
      "0", "00", "007", "12", "123", "1234", "12345678", "3.14159", "1,000,000", "-1", "+1",
      "1e10", "0x1F", "v1.2.3", "1st", "2nd", "abc123def", "a1b2c3", " 123", "  123", "123 ",
      "٣", "١٢٣٤٥", "۱۲۳", "१२३", "১২৩", "๑๒๓", "１２３", "𝟏𝟐𝟑", "²", "½", "Ⅻ", "①", "〇",
      "é", "e\u0301", "cafe\u0301", "naïve", "ß", "ǅ", "ǅemal", "ſ", "ﬁ", "Ω", "\u2126", "\u212b",
      "İ", "ı", "ʰ", "ー", "ª", "中", "中文", "日本語", "ひらがな", "한국어", "ไทย", "עברית",
      "שָׁלוֹם", "العربية", "السَّلَامُ", "हिन्दी", "क्\u200dष", "𝕳𝖊𝖑𝖑𝖔", "𠮷",
      "A\u20dd", "1\u20e3", "a\u0300\u0301\u0302", "\u0301", " \u0301", "ः", "ा",
      "_", "__init__", "snake_case", "‿", "-", "--", "---", "–", "—", "a—b", "(", ")", "[x]",
      "{}", "「」", "!", "!!", "!!!", "?!", "...", "…", "a.b", "e.g.", "U.S.A.", "Mr.",
      "+", "=", "==", "===", "<=", "->", "=>", "±", "∑", "√", "$", "$100", "€", "€9.99", "£",
      "¥", "₹", "₿", "^", "`", "``", "```", "´", "©", "®", "™", "°", "♥", "✓",
      "🙂", "😀", "🚀", "🫠", "❤️", "👍", "👍🏽", "👍🏿", "🏿", "👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈",
      "🇯🇵", "🇺🇳", "#️⃣", "1️⃣",
      "\ue000", "\uf8ff", "\u{f0000}", "\u{10fffd}", "\u{10ffff}", "\uffff", "\ufffe", "\u0378",
      "\ufffd", "\u{e0041}",
      "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
      "<|endoftext|>\n", "\n<|endoftext|>", "<|endoftext|", "<|endoftext", "|endoftext|>",
      "<|ENDOFTEXT|>", "< |endoftext|>", "<|endof<|endoftext|>text|>", "<|", "|>", "<|>",
      "https://example.com/path?query=a&b=c#frag", "foo@bar.com", "http://[::1]:8080/",
      "#include <stdio.h>", "int main(void) { return 0; }", "    indented", "\tindented",
      "if x:\n    y = 1\n", "def f():\n\treturn 1\n", "x = [1, 2, 3]", "a->b", "a::b", "i++",
      "pneumonoultramicroscopicsilicovolcanoconiosis", "supercalifragilisticexpialidocious",
      "Donaudampfschifffahrtsgesellschaftskapitän", "abababababababababab",
      "hahahahahahahaha", "1010101010101010", "........", "----------", "==========",
      "Every effort moves you", "Every effort moves you forward.",
      "I HAD always thought Jack Gisburn rather a cheap genius",
      "Ça va? Où est la bibliothèque?", "Größe, Straße, Ärger.", "Ελληνικά", "Русский текст");
  for (let k = 1; k <= 12; k++) add("a".repeat(k));
  for (let k = 1; k <= 8; k++) add(" ".repeat(k) + "x", "x" + " ".repeat(k), "\n".repeat(k), " ".repeat(k) + "\n");
  const cases = texts.map((t) => {
    const all = encAll(t), ord = encOrd(t);
    roundTrip(t, all); roundTrip(t, ord);
    return { text: t, utf8_hex: hex(utf8(t)), ids: ord, ids_allowed_special: all,
             default_encode_throws: encDefaultThrows(t) };
  });
  writeJSON("short_cases.json", cases);
  manifest.files["short_cases.json"] = { cases: cases.length };
}

// ---- 6. decode: byte tokens, and id sequences that split a character -------------------
{
  // The id of each single byte's token (every byte is one token in GPT-2's vocabulary).
  const byteIds = [];
  for (let b = 0; b < 256; b++) byteIds.push(enc.encode_single_token(Uint8Array.from([b])));
  // md5 over every token's bytes, each preceded by its length as uint16le, ids 0..50256.
  const parts = [];
  let total = 0;
  for (let id = 0; id <= 50256; id++) {
    const b = Buffer.from(enc.decode_single_token_bytes(id));
    const len = Buffer.alloc(2); len.writeUInt16LE(b.length);
    parts.push(len, b); total += b.length;
  }
  const vocabDigest = { n_tokens: 50257, total_bytes: total,
                        md5_len_u16le_then_bytes: md5(Buffer.concat(parts)) };

  const td = new TextDecoder("utf-8"); // non-fatal: WHATWG replacement (U+FFFD)
  const dec = (ids) => {
    const b = enc.decode(Uint32Array.from(ids));
    let valid = true;
    try { new TextDecoder("utf-8", { fatal: true }).decode(b); } catch (e) { valid = false; }
    return { ids, bytes_hex: hex(b), valid_utf8: valid, text_replaced: td.decode(b) };
  };
  const cases = [];
  for (const t of ["🙂", "😀 ok", "👨‍👩‍👧‍👦", "🇯🇵", "中文", "日本語", "€100", "naïve", " “quoted”",
                   "ǅ", "𝕳𝖊𝖑𝖑𝖔", "𠮷", "\ue000", "…", "—", "한국어"]) {
    const ids = encAll(t);
    cases.push({
      from_text: t,
      ids,
      token_bytes_hex: ids.map((id) => hex(enc.decode_single_token_bytes(id))),
      full: dec(ids),
      prefixes: ids.map((_, k) => dec(ids.slice(0, k + 1))),
      singles: ids.map((id) => dec([id])),
    });
  }
  const seqs = [
    [byteIds[0xe2]], [byteIds[0x80]], [byteIds[0xff]], [byteIds[0xe2], byteIds[0x82]],
    [byteIds[0xe2], byteIds[0x82], byteIds[0xac]], [byteIds[0x82], byteIds[0xac], byteIds[0xe2]],
    [byteIds[0xf0], byteIds[0x9f], byteIds[0x99]], [byteIds[0xc3], 64], [64, byteIds[0xa9]],
    [byteIds[0xed], byteIds[0xa0], byteIds[0x80]], [byteIds[0xc0], byteIds[0xaf]],
    [50256], [64, 50256, 65], [220, 50256], [],
  ];
  const raw = seqs.map(dec);
  writeJSON("decode_cases.json", {
    note: "bytes_hex is tiktoken's decode() output (a Uint8Array); text_replaced is those bytes " +
          "through WHATWG TextDecoder('utf-8') without fatal (maximal-subpart U+FFFD replacement, " +
          "as Python's bytes.decode('utf-8', errors='replace'))",
    byte_token_ids: byteIds,
    vocab_digest: vocabDigest,
    split_characters: cases,
    raw_sequences: raw,
  });
}

// ---- manifest ------------------------------------------------------------------------
const listed = new Set(["stress.txt", "stress_invalid.bin"]);
for (const f of fs.readdirSync(outDir)) listed.add(f);
for (const f of [...listed].sort()) {
  if (f === "manifest.json" || f === "README.md" || f.startsWith(".")) continue;
  const b = fs.readFileSync(path.join(["stress.txt", "stress_invalid.bin"].includes(f) ? inDir : outDir, f));
  manifest.files[f] = Object.assign({}, manifest.files[f] || {}, { md5: md5(b), bytes: b.length });
}
writeJSON("manifest.json", manifest);
enc.free();
console.log("wrote", outDir);
