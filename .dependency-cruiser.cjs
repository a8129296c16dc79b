/**
 * Import rules for src/, checked by `npm run lint:deps` (part of `npm run lint`).
 * They mirror the layer diagram in docs/architecture.md: a folder may import folders in lower
 * layers only — never one above it, never a sibling in its own layer — and there are no cycles.
 * Change LAYERS and the diagram together.
 */

/** Bottom -> top. Folders in one inner array are siblings: neither may import the other. */
const LAYERS = [
  ['runtime'],
  ['db', 'envelope'],
  ['telemetry'],
  ['transport'],
  ['schema'],
  ['outbox', 'projection'],
  ['relay', 'inbox'],
  ['effects'],
  ['reconcile'],
  ['ops'],
  ['tenants'],
  ['metrics'],
  ['dashboard', 'converge'],
  ['cli'],
  ['index', 'errors', 'internal', 'adapters'],
];

/**
 * Folders whose index.ts is their public face: other folders import that file, not the ones
 * behind it. A folder may name further files that other layers may use without making them
 * public API (ops/gauges.ts: the reads that metrics and status share; ops/compat.ts: the producer's
 * compat guard, which the package root exports; ops/pipeline-options.ts: the sampling fields the
 * dashboard shares with readPipelineStatus).
 */
const FACADES = {
  inbox: [],
  projection: [],
  reconcile: [],
  relay: [],
  effects: [],
  ops: ['gauges', 'compat', 'pipeline-options'],
  metrics: [],
  tenants: [],
  dashboard: [],
  converge: [],
};

/** The package root and `converge-events/errors` are single files; every other name is a folder. */
const pathOf = (name) => (['index', 'errors'].includes(name) ? `^src/${name}\\.ts$` : `^src/${name}/`);

/** One rule per "may not import" relation, so a violation names both ends. */
function layerRules() {
  const rules = [];
  LAYERS.forEach((layer, level) => {
    for (const from of layer) {
      LAYERS.forEach((other, otherLevel) => {
        if (otherLevel < level) return;
        for (const to of other) {
          if (to === from) continue;
          const sideways = otherLevel === level;
          rules.push({
            name: `${sideways ? 'no-sideways' : 'no-upward'}:${from}->${to}`,
            comment: sideways
              ? `${from} and ${to} share a layer and stay independent of each other (docs/architecture.md).`
              : `${from} sits below ${to} in docs/architecture.md, so it may not import it.`,
            severity: 'error',
            from: { path: pathOf(from) },
            to: { path: pathOf(to) },
          });
        }
      });
    }
  });
  return rules;
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules(),
    {
      name: 'runtime-is-the-floor',
      comment: 'src/runtime is the bottom layer: it imports nothing else from src.',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: '^src/', pathNot: '^src/runtime/' },
    },
    {
      name: 'telemetry-stays-light',
      comment: 'src/telemetry wraps spans around steps of the layers above; it imports runtime/ and envelope/ only.',
      severity: 'error',
      from: { path: '^src/telemetry/' },
      to: { path: '^src/', pathNot: '^src/(telemetry|runtime|envelope)/' },
    },
    {
      name: 'no-circular',
      comment: 'Import cycles (also inside one folder, also through type-only imports) are not allowed.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...Object.entries(FACADES).map(([name, shared]) => ({
      name: `through-the-facade:${name}`,
      comment: `Outside src/${name}/, import src/${name}/index.ts, not the files behind it.`,
      severity: 'error',
      from: { path: '^src/', pathNot: `^src/${name}/` },
      to: { path: `^src/${name}/`, pathNot: `^src/${name}/(${['index', ...shared].join('|')})\\.ts$` },
    })),
    {
      name: 'sql-stays-home',
      comment: "A folder's sql.ts is its private SQL; other folders call the functions that run it.",
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/([^/]+)/sql\\.ts$', pathNot: '^src/$1/' },
    },
    {
      name: 'adapters-stay-thin',
      comment:
        'src/adapters turns ORM transactions into Executors and back: it needs db/ and runtime/ only (docs/architecture.md).',
      severity: 'error',
      from: { path: '^src/adapters/' },
      to: { path: '^src/', pathNot: '^src/(adapters|db|runtime)/' },
    },
    {
      name: 'only-transport-imports-amqplib',
      comment:
        'Every broker call goes through the Transport seam (src/transport/transport.ts, docs/architecture.md): only src/transport/ imports amqplib, type-only imports included.',
      severity: 'error',
      from: { path: '^src/(?!transport/)' },
      to: { path: '(^|/)node_modules/(@types/)?amqplib/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'Every import resolves to a file or an installed package.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'not-to-dev-dep',
      comment:
        'The published library may not depend on devDependencies (type-only imports of @types are fine; an optional peer dependency, such as the ORM of an adapter, is a devDependency too so that it is tested).',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only', 'npm-peer'], pathNot: '/@types/' },
    },
    {
      name: 'no-non-package-json',
      comment:
        'Packages used by src must be declared in package.json (a peer dependency is declared; its peerDependenciesMeta entry reads as npm-no-pkg).',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'], dependencyTypesNot: ['npm-peer'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are dependencies too: a type imported upward couples the layers just the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.d.ts'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
