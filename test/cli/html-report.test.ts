import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
// In CI the browser must be there (scripts/test-all.sh installs it); elsewhere its absence skips the test.
const skip =
  !existsSync(CHROMIUM) && !process.env.CI
    ? `${CHROMIUM} is missing: install Debian's chromium package (scripts/test-all.sh does) to run this test`
    : false;

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

test('floodgate tour --html: a self-contained page that renders its charts in Chromium without a console error', {
  skip,
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'floodgate-report-'));
  const file = join(dir, 'report.html');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  try {
    await promisify(execFile)(process.execPath, ['--import', 'tsx', main, 'tour', '3', '4', '--html', file], {
      env: { ...process.env, NO_COLOR: '1' },
    });
    const html = await readFile(file, 'utf8');
    assert.doesNotMatch(html, /<script|<link|src=|@import|url\(/i, 'nothing loaded from elsewhere');

    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning')
        problems.push(`${message.type()}: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });

    assert.equal(await page.title(), 'floodgate tour: what was measured');
    const charts = page.locator('figure svg');
    assert.equal(await charts.count(), 2);
    for (let i = 0; i < 2; i++) {
      const box = await charts.nth(i).boundingBox();
      assert.ok(
        box !== null && box.width > 300 && box.height > 100,
        `chart ${i + 1} is drawn (${JSON.stringify(box)})`,
      );
    }
    // Chapter 3: 40 requests as dots; chapter 4: 35 requests as bars.
    assert.equal(await page.locator('figure').nth(0).locator('circle').count(), 40);
    assert.equal(await page.locator('figure').nth(1).locator('rect').count(), 35);
    assert.deepEqual(requested, [pathToFileURL(file).href], 'the page asks for nothing but itself');
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    await rm(dir, { recursive: true, force: true });
  }
});
