// Imports profile files with speedscope's own importer (the one its web page
// runs on a dropped file), and prints what it made of them, one line each:
//   profile <TAB> name <TAB> total weight
//   call <TAB> start <TAB> end <TAB> frame;frame;... (outermost first)
// the calls in the order speedscope's "Time Order" view draws them.
//   node spec/support/import_speedscope.js FILE
// The importer is a function of the browser bundle in the `speedscope` npm
// package (build/consumers): the bundle is run in a context with stand-ins
// for the page's globals, and the function is taken out before the app
// would start.
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const root = path.resolve(__dirname, "../../build/consumers/node_modules/speedscope/dist/release");
const bundle = fs.readdirSync(root).find((f) => /^speedscope-.*\.js$/.test(f));
let src = fs.readFileSync(path.join(root, bundle), "utf8");
// The importer of a file: reads its name and contents, then tries each format.
const importer = /async function ([\w$]+)\(t\)\{let e=await t\.name\(\),n=await t\.readAsArrayBuffer\(\)/.exec(src);
const appStart = src.lastIndexOf("console.log(`speedscope v");
if (!importer || appStart < 0) {
  console.error("cannot find speedscope's importer in " + bundle);
  process.exit(2);
}
src = src.slice(0, appStart) + "globalThis.__importFile=" + importer[1] + ";})();";

const noop = () => {};
// Any property of it, called or constructed, gives another one.
const anything = () =>
  new Proxy(function () {}, {
    get: (_, k) => (k === Symbol.toPrimitive ? () => "" : anything()),
    apply: () => anything(),
    construct: () => anything(),
  });
const page = { console, TextDecoder, TextEncoder, setTimeout, clearTimeout, URL, WebAssembly };
Object.assign(page, {
  window: page,
  self: page,
  document: anything(),
  navigator: { userAgent: "node", platform: "linux" },
  location: { hash: "", search: "", href: "" },
  localStorage: { getItem: () => null, setItem: noop },
  addEventListener: noop,
  matchMedia: () => ({ matches: false, addEventListener: noop, addListener: noop }),
  requestAnimationFrame: noop,
});
page.globalThis = page;
vm.createContext(page);
vm.runInContext(src, page);

(async () => {
  const file = process.argv[2];
  const bytes = fs.readFileSync(file);
  const text = bytes.toString("utf8");
  const source = {
    name: async () => path.basename(file),
    readAsArrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length),
    readAsText: async () => ({
      parseAsJSON: () => JSON.parse(text),
      splitLines: () => text.split("\n"),
      firstChunk: () => text.slice(0, 4096),
    }),
  };
  // Its own log lines ("Importing as ...") go to stderr.
  page.console = { ...console, log: (...a) => console.error(...a), warn: (...a) => console.error(...a) };
  const group = await page.__importFile(source);
  if (!group) {
    console.error("speedscope did not recognise " + file);
    process.exit(1);
  }
  const out = [];
  for (const p of group.profiles) {
    out.push(["profile", p.getName(), p.getTotalWeight()].join("\t"));
    const stack = [];
    const open = [];
    p.forEachCall(
      (node, t) => {
        stack.push(node.frame.name);
        open.push([t, stack.join(";")]);
      },
      (node, t) => {
        stack.pop();
      }
    );
    for (const [t, s] of open) out.push(["call", t, s].join("\t"));
  }
  process.stdout.write(out.join("\n") + "\n");
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
