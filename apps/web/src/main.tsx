// Entry of the dashboard page.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { createApi } from './api.js';
import { initIdle } from './idle.js';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('MQD: index.html has no #root element');
initIdle();
createRoot(root).render(
  <StrictMode>
    <App api={createApi()} />
  </StrictMode>,
);
