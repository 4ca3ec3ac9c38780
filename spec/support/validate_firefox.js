// Checks a Firefox Profiler processed profile the way the profiler reads
// one: the processed-profile versions, a grey (default) category, one
// thread whose tables have every column of their version as long as the
// table says, every index in range, stacks whose prefix is an earlier
// stack, sample times in order, a known weight type.
//   node spec/support/validate_firefox.js file.firefox.json
// Prints each sample as a collapsed line (frames root first, the leaf
// marked with the VM state its category stands for, then the weight) and
// exits 0; prints what is wrong and exits 1 otherwise.
const fs = require("fs");

const TABLES = {
  samples: ["stack", "time", "weight"],
  stackTable: ["prefix", "frame", "category", "subcategory"],
  frameTable: ["address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol", "innerWindowID",
    "implementation", "line", "column"],
  funcTable: ["name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"],
  resourceTable: ["lib", "name", "host", "type"],
  markers: ["data", "name", "startTime", "endTime", "phase", "category"],
  nativeSymbols: ["address", "libIndex", "name", "functionSize"],
};
// The leaf categories, in the order of the collapsed text's state letters.
const STATES = { Compiled: "N", Interpreted: "I", "C code": "C", GC: "G", "JIT compiler": "J" };

function fail(msg) {
  console.log("invalid: " + msg);
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
function index(v, below, what) {
  check(Number.isInteger(v) && v >= 0 && v < below, `${what}: ${JSON.stringify(v)} not an index below ${below}`);
  return v;
}

const doc = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const meta = doc.meta;
check(meta && typeof meta === "object", "no meta");
check(meta.preprocessedProfileVersion === 49, "meta.preprocessedProfileVersion " + meta.preprocessedProfileVersion);
check(meta.version === 24, "meta.version " + meta.version);
check(typeof meta.interval === "number" && meta.interval > 0, "meta.interval");
check(typeof meta.startTime === "number", "meta.startTime");
for (const key of ["libs", "threads", "pages", "counters", "profilerOverhead"]) {
  check(Array.isArray(doc[key]), key + " is not a list");
}
const categories = meta.categories;
check(Array.isArray(categories) && categories.some((c) => c.color === "grey"), "no grey (default) category");
for (const c of categories) {
  check(typeof c.name === "string" && typeof c.color === "string", "category without a name or colour");
  check(Array.isArray(c.subcategories) && c.subcategories.length > 0, "category without subcategories");
}
check(doc.threads.length === 1, "threads: " + doc.threads.length);
const t = doc.threads[0];
check(typeof t.name === "string" && typeof t.pid === "string", "thread name and pid (a string)");
check(Array.isArray(t.stringArray) && t.stringArray.every((s) => typeof s === "string"), "stringArray");
for (const [table, columns] of Object.entries(TABLES)) {
  const n = t[table] && t[table].length;
  check(Number.isInteger(n), table + ".length");
  for (const c of columns) {
    check(Array.isArray(t[table][c]) && t[table][c].length === n, `${table}.${c} is not ${n} long`);
  }
}
const { samples, stackTable: stacks, frameTable: frames, funcTable: funcs, resourceTable: resources } = t;
check(["samples", "tracing-ms", "bytes"].includes(samples.weightType), "weightType " + samples.weightType);
const strings = t.stringArray.length;
for (let i = 0; i < stacks.length; i++) {
  if (stacks.prefix[i] !== null) index(stacks.prefix[i], i, "stackTable.prefix");
  index(stacks.frame[i], frames.length, "stackTable.frame");
  index(stacks.category[i], categories.length, "stackTable.category");
  index(stacks.subcategory[i], categories[stacks.category[i]].subcategories.length, "stackTable.subcategory");
}
for (let i = 0; i < frames.length; i++) {
  index(frames.func[i], funcs.length, "frameTable.func");
  if (frames.category[i] !== null) index(frames.category[i], categories.length, "frameTable.category");
}
for (let i = 0; i < funcs.length; i++) {
  index(funcs.name[i], strings, "funcTable.name");
  if (funcs.resource[i] !== -1) index(funcs.resource[i], resources.length, "funcTable.resource");
  if (funcs.fileName[i] !== null) index(funcs.fileName[i], strings, "funcTable.fileName");
  check(typeof funcs.isJS[i] === "boolean", "funcTable.isJS");
}
for (let i = 0; i < resources.length; i++) index(resources.name[i], strings, "resourceTable.name");
const lines = [];
for (let i = 0; i < samples.length; i++) {
  check(i === 0 || samples.time[i - 1] <= samples.time[i], "samples.time out of order at " + i);
  check(Number.isInteger(samples.weight[i]) && samples.weight[i] > 0, "samples.weight at " + i);
  const names = [];
  let leaf = null;
  for (let s = index(samples.stack[i], stacks.length, "samples.stack"); s !== null; s = stacks.prefix[s]) {
    const f = stacks.frame[s];
    if (leaf === null) leaf = categories[stacks.category[s]].name;
    names.push(t.stringArray[funcs.name[frames.func[f]]]);
  }
  check(leaf in STATES, "the leaf of sample " + i + " has no VM state category (" + leaf + ")");
  lines.push(names.reverse().join(";") + "_[" + STATES[leaf] + "] " + samples.weight[i]);
}
console.log(lines.join("\n"));
