import '@excalidraw/excalidraw/index.css';
import 'katex/dist/katex.min.css';
import '../styles.css';
import './replay.css';
import { createRoot } from 'react-dom/client';
import { Replay } from './Replay.js';

// The page is served at /replay/<token>; the token is the replay link's pass (never logged, never sent elsewhere).
const token = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
createRoot(document.getElementById('root')!).render(<Replay token={token} />);
