declare module "virtual:vectors" {
  /** Every file of protocol/vectors/ as text, by file name (scripts/bundle-tests.mjs embeds them). */
  const files: Record<string, string>;
  export default files;
}
