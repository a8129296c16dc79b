// The `converge` executable when run from source (`npm run converge`); the program itself is built in program.ts.
import { run } from './program.js';

await run(process.argv);
