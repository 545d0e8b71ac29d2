/**
 * The folders of src/ in layers, lowest first: a folder imports only from the layers below its
 * own (README, "Arrows point down"). Type imports count too. `npm run cycles` runs it.
 */
const layers = [
  ['config'],
  ['schemas'],
  ['http'],
  ['db'],
  ['telemetry'],
  ['users', 'limits', 'tokens'],
  ['plugins'],
  ['routes', 'management']
]

const folders = (names) => `^src/(${names.join('|')})/`

module.exports = {
  forbidden: layers.flatMap((layer, index) => {
    const sameLayer = layer.length > 1 ? [{
      name: `within-${layer.join('-')}`,
      severity: 'error',
      comment: `${layer.join(', ')} share a layer: none of them imports another`,
      from: { path: folders(layer) },
      to: { path: folders(layer), pathNot: '^src/$1/' }
    }] : []
    const above = layers.slice(index + 1).flat()
    return above.length === 0 ? sameLayer : [...sameLayer, {
      name: `${layer.join('-')}-imports-upward`,
      severity: 'error',
      comment: `${layer.join(', ')} may import only from the layers below: not ${above.join(', ')}`,
      from: { path: folders(layer) },
      to: { path: folders(above) }
    }]
  }),
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' }
  }
}
