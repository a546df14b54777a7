/** `loomwork/ui`: the web dashboard, served by the package itself (docs/ui.md). */
export { startUiServer, type UiServer, type UiServerOptions } from "./server.ts";
export { readTokenFile } from "./auth.ts";
