// Prints the README's settings table from the config schema: `npm run docs:config`.
import { settingsTable } from '../src/config/config.js';

console.log(settingsTable());
