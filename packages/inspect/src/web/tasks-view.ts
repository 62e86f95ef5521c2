/**
 * The page's task list (`#/tasks`): the gateways' durable tasks by tag,
 * with the same facts as `tether-admin tasks`, filterable by status and
 * principal. Only a list: the API looks no task up by id (a bearer handle)
 * or by tag, so there is no task page to link to.
 */
import type { TaskList, TaskStatusName, TaskSummary } from '../task-model.js';
import { age, api, app, duration, h, principalFilter } from './dom.js';

/** TASK_STATUSES of task-model.ts, which the page cannot import at run time (it loads only its own scripts). */
const STATUSES: readonly TaskStatusName[] = ['working', 'input_required', 'completed', 'failed', 'cancelled', 'routed'];

interface TaskFilters {
  readonly status: string;
  readonly principal: string;
}

/** The list's address with its filters: `#/tasks`, `#/tasks?status=…&principal=…`. */
export function tasksHash(filters: TaskFilters): string {
  const q = new URLSearchParams();
  if (filters.status !== '') q.set('status', filters.status);
  if (filters.principal !== '') q.set('principal', filters.principal);
  const text = q.toString();
  return text === '' ? '#/tasks' : `#/tasks?${text}`;
}

/** What the task came to, without its content: an error code, whether a result is an error, pending inputs. */
function outcome(t: TaskSummary): string {
  switch (t.status) {
    case 'working':
      return 'running';
    case 'input_required':
      return `${t.pendingInputs} input request${t.pendingInputs === 1 ? '' : 's'} pending`;
    case 'completed':
      return t.isError === true ? 'tool error (isError)' : 'result';
    case 'failed':
      return `error ${t.errorCode ?? '—'}${t.statusMessage === null ? '' : `: ${t.statusMessage}`}`;
    case 'cancelled':
      return 'cancelled';
    case 'routed':
      return 'held by an upstream replica';
  }
}

function sizes(t: TaskSummary): string {
  return `record ${t.bytes.record} B · params ${t.bytes.params} B · result ${t.bytes.result} B · error ${t.bytes.error} B`;
}

function row(t: TaskSummary): HTMLElement {
  const left = t.expiresAtMs - Date.now();
  return h(
    'tr',
    { 'data-task': t.tag, 'data-status': t.status, 'data-runner': t.runner, 'data-principal': t.principal },
    h('td', { class: 'mono' }, t.tag),
    h('td', {}, h('span', { class: `chip task-${t.status}` }, t.status)),
    h('td', { class: 'mono' }, t.tool || '—'),
    h('td', { class: 'mono' }, t.route || '—'),
    h('td', { class: 'mono principal' }, t.principal === '' ? '—' : h('a', { href: tasksHash({ status: '', principal: t.principal }), title: 'this principal\'s tasks' }, t.principal)),
    h('td', { class: 'mono' }, t.replica !== null ? `replica ${t.replica.slice(0, 8)}…` : (t.runnerInstance ?? '—')),
    h('td', { class: 'runner' }, t.runner === 'none' ? h('span', { class: 'muted', title: 'no upstream call running' }, '—') : h('span', { class: `chip ${t.runner === 'alive' ? 'good' : t.runner === 'gone' ? 'bad' : 'neutral'}` }, t.runner)),
    h('td', { class: 'num' }, String(t.attempts)),
    h('td', { class: 'num' }, String(t.reruns)),
    h('td', { class: 'num' }, String(t.rounds)),
    h('td', { class: 'num', title: new Date(t.createdAtMs).toISOString() }, age(t.createdAtMs)),
    h('td', { class: 'num', title: `TTL ${duration(t.ttlMs)}, expires ${new Date(t.expiresAtMs).toISOString()}` }, left > 0 ? duration(left) : 'expired'),
    h('td', { class: 'outcome', title: sizes(t) }, outcome(t)),
  );
}

export async function showTasks(status: string, principal: string): Promise<void> {
  const list = await api<TaskList>(`/api/tasks${tasksHash({ status, principal }).slice('#/tasks'.length)}`);
  const select = h('select', { id: 'status-filter', 'aria-label': 'filter by status' }, h('option', { value: '' }, 'any status'));
  for (const st of STATUSES) select.append(h('option', { value: st }, st));
  select.value = status;
  select.addEventListener('change', () => {
    window.location.hash = tasksHash({ status: select.value, principal });
  });
  const { input, error: inputError } = principalFilter({ input: 'task-principal-filter', error: 'task-principal-error' }, principal, (value) => {
    window.location.hash = tasksHash({ status, principal: value });
  });
  const heads = ['Task', 'Status', 'Tool', 'Route', 'Principal', 'Runner', 'Alive', 'Attempts', 'Reruns', 'Rounds', 'Age', 'TTL left', 'Outcome'];
  const numeric = new Set(['Attempts', 'Reruns', 'Rounds', 'Age', 'TTL left']);
  const table = h(
    'table',
    { id: 'tasks' },
    h('thead', {}, h('tr', {}, ...heads.map((x) => h('th', { class: numeric.has(x) ? 'num' : undefined }, x)))),
    h('tbody', {}, ...list.tasks.map(row)),
  );
  const empty = list.streamExists ? 'No tasks.' : `No tasks: tasks were never used in this namespace (no stream ${list.stream}).`;
  app().replaceChildren(
    h('h1', {}, 'Tasks'),
    h(
      'div',
      { class: 'toolbar' },
      h('label', { for: 'status-filter' }, 'Status'),
      select,
      h('label', { for: 'task-principal-filter' }, 'Principal'),
      input,
      inputError,
      h('span', { class: 'muted', id: 'task-count' }, `${list.tasks.length} task${list.tasks.length === 1 ? '' : 's'}`),
    ),
    h('p', { class: 'muted' }, 'Durable tasks by tag (the id is the client\'s bearer handle). Never arguments, input or results: counts, sizes (hover an outcome), an error\'s code.'),
    list.tasks.length === 0 ? h('p', { class: 'muted', id: 'tasks-empty' }, empty) : table,
  );
}
