import js from "@eslint/js";
import tseslint from "typescript-eslint";

const impure = {
  "no-restricted-imports": [
    "error",
    {
      patterns: [
        { group: ["node:*"], message: "kernel, fold and analytics stay pure: no Node modules." },
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

export default tseslint.config(
  { ignores: ["node_modules/**", "artifacts/**", ".tmp/**", "dist/**"] },
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
  { files: ["src/kernel/**", "src/fold/**", "src/analytics/**"], rules: impure },
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
      },
    },
  },
);
