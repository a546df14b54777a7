/** A JSON value: what the log holds. Its own module, so errors and json can both name it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
