import '@excalidraw/excalidraw/index.css';
import 'katex/dist/katex.min.css';
import './styles.css';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { keepLinksOnThePage } from './ui/offsiteLinks.js';

// The page is served at /embed/<token>; the token is the participant's pass (never logged, never sent elsewhere).
const token = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
keepLinksOnThePage();
createRoot(document.getElementById('root')!).render(<App token={token} />);
