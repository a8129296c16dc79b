/** The CLI's `--version`; the walk up to package.json lives in runtime/ since telemetry names its tracer with it too. */
export { packageVersion } from '../runtime/package-version.js';
