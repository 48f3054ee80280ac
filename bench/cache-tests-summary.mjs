// bench/cache-tests-summary.mjs: reads the results of the HTTP cache test suite
// (http-cache-tests, https://cache-tests.fyi) for zipwire and the results the package publishes
// for other shared caches, and prints one table: for each implementation, how many of the
// suite's required tests it passes and fails, and how many optimal ones it misses. Each
// result is classed as the suite's own page classes it (lib/display.mjs): a test whose
// dependencies did not pass counts as "dependency", a setup failure as "setup".
//
// Usage: node cache-tests-summary.mjs PACKAGE_DIR ZIPWIRE_RESULTS.json
import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [packageDir, oursFile] = process.argv.slice(2)
const load = (file) => import(pathToFileURL(path.join(packageDir, file)).href)
const suites = (await load('tests/index.mjs')).default
suites.push((await load('tests/surrogate-control.mjs')).default)
const index = (await load('results/index.mjs')).default

const tests = new Map()
for (const suite of suites) {
  for (const test of suite.tests) {
    tests.set(test.id, test)
  }
}

// The class of one test's result: pass, fail, optional (an optimal test missed), yes/no (a
// check), setup, dependency, untested.
function classify (results, id, seen = new Set()) {
  const test = tests.get(id)
  const result = results[id]
  if (result === undefined) return 'untested'
  if (test.depends_on !== undefined && !seen.has(id)) {
    seen.add(id)
    for (const dependency of test.depends_on) {
      if (!['pass', 'yes'].includes(classify(results, dependency, seen))) return 'dependency'
    }
  }
  if (Array.isArray(result) && result[0] === 'Setup') return 'setup'
  const kind = test.kind || 'required'
  if (kind === 'required') return result === true ? 'pass' : 'fail'
  if (kind === 'optimal') return result === true ? 'pass' : 'optional'
  return result === true ? 'yes' : 'no'
}

function count (results) {
  const counts = { required: 0, pass: 0, fail: 0, optional: 0, setup: 0, dependency: 0 }
  for (const [id, test] of tests) {
    if (test.browser_only) continue
    const kind = test.kind || 'required'
    const cls = classify(results, id)
    if (kind === 'required') {
      counts.required += 1
      if (cls in counts) counts[cls] += 1
    } else if (kind === 'optimal' && cls === 'optional') {
      counts.optional += 1
    }
  }
  return counts
}

const rows = [['zipwire', 'this run', JSON.parse(fs.readFileSync(oursFile, 'utf8'))]]
for (const item of index) {
  if (item.type !== 'rev-proxy') continue
  const file = path.join(packageDir, 'results', item.file)
  rows.push([item.name, item.version, JSON.parse(fs.readFileSync(file, 'utf8'))])
}

const header = ['cache', 'version', 'required', 'passed', 'failed', 'setup/dep', 'optimal missed']
const table = rows.map(([name, version, results]) => {
  const c = count(results)
  return [name, version, c.required, c.pass, c.fail, c.setup + c.dependency, c.optional]
})
const widths = header.map((h, i) => Math.max(h.length, ...table.map(r => String(r[i]).length)))
const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')
console.log(line(header))
for (const row of table) console.log(line(row))

// The required tests zipwire fails, with the suite's reason, for the reader to check.
const ours = rows[0][2]
const failed = [...tests.keys()].filter(id => !tests.get(id).browser_only && classify(ours, id) === 'fail')
if (failed.length) {
  console.log('\nrequired tests zipwire fails:')
  for (const id of failed) {
    const reason = Array.isArray(ours[id]) ? ours[id].join(': ') : String(ours[id])
    console.log(`  ${id}: ${reason}`)
  }
}
