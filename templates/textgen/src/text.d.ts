// The build bundles *.txt imports as their text (esbuild's text loader).
declare module "*.txt" {
  const text: string;
  export default text;
}
