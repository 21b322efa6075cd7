/**
 * `require` as this file has it, for loading optional peers (`@opentelemetry/api`) synchronously from floodgate's
 * own directory. A `.cts` file is CommonJS in the build and under tsx alike, so the code that uses it needs
 * neither `import.meta` (a syntax error in CommonJS) nor `__filename` (absent from an ES module).
 */
const peerRequire: NodeJS.Require = require;
export = peerRequire;
