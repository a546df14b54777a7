/**
 * The dashboard's client script, served as one ES module at `/assets/app.js`: plain browser
 * JavaScript kept as text in these files, so the package serves it with no build step.
 */
import { CLIENT_CHARTS } from "./client-charts.ts";
import { CLIENT_CORE } from "./client-core.ts";
import { CLIENT_EXECUTION } from "./client-execution.ts";
import { CLIENT_LIST } from "./client-list.ts";

export const APP_JS = [CLIENT_CORE, CLIENT_LIST, CLIENT_CHARTS, CLIENT_EXECUTION].join("\n");
