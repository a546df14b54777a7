/** `loomwork/ui`: the web dashboard, served by the package itself (docs/ui.md). */
export { startUiServer } from "./server.ts";
