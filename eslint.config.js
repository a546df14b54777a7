import js from "@eslint/js";
import tseslint from "typescript-eslint";
import sizeRules from "./eslint.sizes.json" with { type: "json" };

const impure = {
  "no-restricted-imports": [
    "error",
    {
      patterns: [
        { group: ["node:*"], message: "kernel, fold and analytics stay pure: no Node modules." },
        {
          group: ["**/runtime/*", "**/cli/*", "**/ui/*", "**/remote/*", "**/store/*"],
          message: "kernel, fold and analytics sit below the store and the runtime.",
        },
      ],
    },
  ],
  "no-restricted-globals": [
    "error",
    { name: "setTimeout", message: "pure layers do not schedule: time is an input." },
    { name: "setInterval", message: "pure layers do not schedule: time is an input." },
    { name: "crypto", message: "pure layers take ids and randomness as inputs." },
  ],
  "no-restricted-syntax": [
    "error",
    {
      selector: "MemberExpression[object.name='Date'][property.name='now']",
      message: "use the injected clock",
    },
    { selector: "NewExpression[callee.name='Date']", message: "use the injected clock" },
    {
      selector: "MemberExpression[object.name='Math'][property.name='random']",
      message: "randomness is an input",
    },
  ],
};

/**
 * The rooms below the runtime see the Effect contract (src/effects/effect.ts), the store SPI and
 * the kernel, never the runtime or a face of it (issue 19; docs/architecture.md).
 */
const belowRuntime = {
  "no-restricted-imports": [
    "error",
    {
      patterns: [
        {
          group: ["**/runtime/*", "**/cli/*", "**/ui/*", "**/remote/*"],
          message:
            "a room below the runtime imports neither the runtime nor the CLI, UI or remote.",
        },
      ],
    },
  ],
};

/** The runtime sits below its faces: it imports no CLI, dashboard, remote seam or test double. */
const runtimeRoom = {
  "no-restricted-imports": [
    "error",
    {
      patterns: [
        {
          group: ["**/cli/*", "**/ui/*", "**/remote/*", "**/testing/*", "**/analytics/*"],
          message:
            "the runtime imports neither its faces (cli, ui, remote) nor testing or analytics.",
        },
      ],
    },
  ],
};

/**
 * The dashboard's browser client (src/ui/client/) runs in a page: no Node module or global, and
 * of the server's modules only their types (api-types.ts) and the pure analytics (numbers.ts).
 * Its tsconfig carries @types/node only because the API's types reach the runtime's.
 */
const browserRoom = {
  "@typescript-eslint/no-restricted-imports": [
    "error",
    {
      patterns: [
        {
          group: ["node:*"],
          message: "the dashboard's client runs in the browser: no Node modules.",
        },
        {
          group: [
            "../*.ts",
            "!../api-types.ts",
            ...[
              "runtime",
              "store",
              "cli",
              "remote",
              "providers",
              "kernel",
              "fold",
              "effects",
              "trust",
            ].map((room) => `../../${room}/*`),
          ],
          allowTypeImports: true,
          message: "the client imports the server's types only (api-types.ts), and pure analytics.",
        },
      ],
    },
  ],
  "no-restricted-globals": [
    "error",
    ...["process", "Buffer", "require", "global", "__dirname", "__filename", "setImmediate"].map(
      (name) => ({ name, message: "the dashboard's client runs in the browser, not in Node." }),
    ),
  ],
};

export default tseslint.config(
  { ignores: ["node_modules/**", "artifacts/**", ".tmp/**", "dist/**", "dist.next/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/require-await": "off",
    },
  },
  {
    files: ["src/effects/**", "src/providers/**", "src/store/**", "src/trust/**", "src/testing/**"],
    rules: belowRuntime,
  },
  { files: ["src/runtime/**"], rules: runtimeRoom },
  { files: ["src/kernel/**", "src/fold/**", "src/analytics/**"], rules: impure },
  { files: ["src/ui/client/**"], rules: browserRoom },
  // Sizes that keep a module readable (issue 24; STYLE 10): a file of src/ holds one concept in
  // at most 400 lines, and a function fits on a screen (80 lines, blank lines and comments
  // aside). The numbers are in eslint.sizes.json, which test/structure.test.ts reads too.
  { files: ["src/**/*.ts"], rules: sizeRules },
  { files: ["**/*.js", "**/*.mjs"], ...tseslint.configs.disableTypeChecked },
  {
    // Plain-JavaScript scripts run by Node (the build, the package smoke test).
    files: ["scripts/**/*.mjs"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        URL: "readonly",
        Buffer: "readonly",
      },
    },
  },
);
