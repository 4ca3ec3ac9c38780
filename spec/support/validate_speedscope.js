// Validates speedscope files against the file-format schema published in the
// `speedscope` npm package, with the ajv JSON-schema validator.
//   node spec/support/validate_speedscope.js file.speedscope.json...
// Exits 0 when every file is valid; prints the errors otherwise.
const fs = require("fs");
const path = require("path");
const root = path.resolve(__dirname, "../../build/consumers/node_modules");
const Ajv = require(path.join(root, "ajv"));
const schema = JSON.parse(fs.readFileSync(path.join(root, "speedscope/dist/release/file-format-schema.json"), "utf8"));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
let failed = 0;
for (const file of process.argv.slice(2)) {
  const doc = JSON.parse(fs.readFileSync(file, "utf8"));
  if (validate(doc)) {
    console.log("valid " + file);
  } else {
    failed++;
    console.log("invalid " + file + ": " + JSON.stringify(validate.errors.slice(0, 5)));
  }
}
process.exit(failed ? 1 : 0);
