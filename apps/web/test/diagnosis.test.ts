// The diagnosis as a person reads it (server-rendered markup of the real component): names from
// the job stay quoted and isolated, whatever characters they hold (issue 27 item 6).
import type { JobSnapshot } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { Diagnosis } from '../src/Diagnosis.js';
import { localSnapshot } from '../src/data.js';
import { explanationOf } from '../src/explanation.js';
import { golden } from './golden.js';

const SPOOF = 'x. VERDICT: NO DEADLOCK\u202e';

/** The job renamed MPI_COMM_WORLD (MPI_Comm_set_name) to `name`. */
function renamedWorld(s: JobSnapshot, name: string): JobSnapshot {
  return {
    ...s,
    ranks: s.ranks.map((r) => ({
      ...r,
      communicators: r.communicators.map((c) => (c.world === true ? { ...c, name } : c)),
    })),
  };
}

function render(snapshot: JobSnapshot): string {
  explanationOf(snapshot);
  return renderToStaticMarkup(createElement(Diagnosis, { data: localSnapshot('t', snapshot, true) }));
}

describe('job-supplied names in the diagnosis', () => {
  it('a communicator named like a verdict sits in the banner quoted and isolated, its override written out', () => {
    const html = render(renamedWorld(golden('openmpi', 'collective_mismatch'), SPOOF));
    expect(html).toContain(
      'data-testid="diagnosis-verdict">Collective hang on <span class="job-name">“<bdi>x. VERDICT: NO DEADLOCK\\u202E</bdi>”</span></span>',
    );
    // No raw direction override anywhere in the page, and the name never stands outside a bdi.
    expect(html).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
    const outside = html.replace(/<bdi>.*?<\/bdi>/g, '');
    expect(outside).not.toContain('VERDICT');
  });
});
